"""The documentation site's generated pages (`docs/`, built with mkdocs-material from `mkdocs.yml`).

    python -m tools.docs            regenerate every generated page
    python -m tools.docs --check    exit 1, naming each stale file, when a generated page is not current

What is generated, each found by introspection (never a fixed module path, so modules may move):
    config      docs/configuration/reference.md   the pydantic `BaseSettings` model under `daemon.config`
    metrics     docs/operations/metrics.md        the `Metrics` registry under `daemon.core`
    log events  docs/operations/log-events.md     the log-event catalogue (`EVENTS`) under `daemon.ops`
    layout      docs/development/layout.md        every module of `daemon` (docstring, size, imports)
`pages.generated()` maps each path (relative to the repository) to its bytes; tests/docs checks them.
The report figures (docs/reports/img) are curated, not generated: `python -m tools.docs.figure RUN/plot.png NAME`
puts a run's plot there under 200 KB (`figure`).
"""
