"""The per-part record: one row per line crossing in an embedded SQLite file, its APIs and the review page.

`store` (`Store`: the file, its indexes, pages and counts), `consumer` (`Recorder`: reads the objects
streams off the hot path, with its own read position kept in the file, and writes the rows; prunes by
the retention), `api` (`GET /api/crossings`, `GET /api/counts`, the page `/review`), `review_page.html`
and `review_page.js` (the page: crossings with their snapshots, filters, the clip with the box and the
line drawn over it, counts per hour and per shift).

May import: `daemon.core`, `daemon.config` and the stage rooms. Entry points: `Recorder`, `ReviewApi`.
"""
