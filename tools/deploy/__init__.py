"""Installing the daemon as a systemd service (shell, run as root; not imported):

    sudo tools/deploy/install-service.sh [--gpus "0 1"] [--python python3] [--pip-args "..."]

The development environment's `tools/bootstrap.sh` stays in tools/ (the README's commands name it).
"""
