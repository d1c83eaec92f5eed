"""GigE Vision cameras (`gige://<device>`), read directly through Aravis: no encoder, no RTSP.

`link.GigeLink` is the camera kind's link (`daemon.ingest.kinds.make_link`): it opens the camera,
applies `[cameras.gige]` through GenICam features (`features`), and hands each complete frame on
as a `Frame`, converted once by swscale in the worker like a decoded RTSP frame (`pixels`);
`timing` numbers frames from the camera's block id and maps its timestamps onto the host clock.
Only `link` and `features` import Aravis (PyGObject's `gi`): `pixels` and `timing` do not.
"""
