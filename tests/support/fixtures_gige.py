"""Fixtures for GigE Vision tests: Aravis' fake camera on loopback (`tools.kit.gige_fake`).

`gige_camera(loss_per_thousand=0) -> FakeGigeCamera` starts `arv-fake-gv-camera-0.8 -i 127.0.0.1`
(the real GVCP/GVSP protocol) and closes it at the end of the test. Skips where Aravis' Python
binding or the fake camera is not installed (`tools/bootstrap.sh --dev` installs both; under CI a
skip fails).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from daemon.config.gige import aravis_problem
from tools.kit.gige_fake import FAKE_CAMERA, FakeGigeCamera, installed

__all__ = ["FakeGigeCamera", "gige_camera", "need_aravis"]


def need_aravis() -> None:
    """Skip the test where this Python cannot read GigE cameras or the fake camera is missing."""
    problem = aravis_problem()
    if problem is not None:
        pytest.skip(problem)
    if not installed():
        pytest.skip(f"{FAKE_CAMERA} is not installed (Debian package aravis-tools)")


@pytest.fixture
def gige_camera() -> Iterator[Callable[..., FakeGigeCamera]]:
    need_aravis()
    cameras: list[FakeGigeCamera] = []

    def start(loss_per_thousand: int = 0, serial: str = "GV01") -> FakeGigeCamera:
        camera = FakeGigeCamera(serial, loss_per_thousand)
        cameras.append(camera)
        return camera.start()

    yield start
    for camera in cameras:
        camera.close()
