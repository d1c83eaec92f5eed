"""The systemd units and tools/deploy/install-service.sh.

`systemd-analyze verify` checks the units (in a throwaway root holding the unit files, a
stand-in for the installed `beltsight` executable and the host's own system units); the
template and the bridge's unit keep every hardening setting of beltsight.service; the instance name selects the GPU,
the config and its own directories; everything the daemon and ONNX Runtime write lands in a
directory systemd makes writable under ProtectSystem=strict / ProtectHome; the install script
is idempotent in a throwaway root."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from daemon.config.settings import load_settings

ROOT = Path(__file__).resolve().parents[3]
UNITS = ROOT / "systemd"
SINGLE = UNITS / "beltsight.service"
TEMPLATE = UNITS / "beltsight@.service"
BRIDGE = UNITS / "beltsight-bridge.service"
HARDENING = (
    "NoNewPrivileges",
    "ProtectSystem",
    "ProtectHome",
    "PrivateTmp",
    "ProtectKernelTunables",
    "ProtectControlGroups",
    "RestrictSUIDSGID",
    "LockPersonality",
)
SAME_IN_BOTH = (
    *HARDENING,
    "Type",
    "NotifyAccess",
    "User",
    "Group",
    "SupplementaryGroups",
    "WatchdogSec",
    "TimeoutStartSec",
    "TimeoutStopSec",
    "KillSignal",
    "Restart",
    "RestartPreventExitStatus",
    "LimitNOFILE",
)
WRITABLE_ENV = ("HOME", "XDG_CACHE_HOME", "CUPY_CACHE_DIR", "CUDA_CACHE_PATH", "BELTSIGHT_REDIS__SPOOL_DIR")


def parse(path: Path) -> dict[str, list[tuple[str, str]]]:
    sections: dict[str, list[tuple[str, str]]] = {}
    current = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            current = line.strip("[]")
            sections.setdefault(current, [])
            continue
        key, _, value = line.partition("=")
        sections[current].append((key.strip(), value.strip()))
    return sections


def service(path: Path) -> dict[str, str]:
    """[Service] as key -> value (repeated keys joined by newlines)."""
    out: dict[str, str] = {}
    for key, value in parse(path)["Service"]:
        out[key] = f"{out[key]}\n{value}" if key in out else value
    return out


def environment(path: Path, instance: str = "") -> dict[str, str]:
    env = {}
    for key, value in parse(path)["Service"]:
        if key == "Environment":
            name, _, val = value.partition("=")
            env[name] = val.replace("%i", instance)
    return env


def writable_dirs(path: Path, instance: str = "") -> list[str]:
    svc = service(path)
    dirs = [f"/var/lib/{d}" for d in svc.get("StateDirectory", "").split()]
    dirs += [f"/var/cache/{d}" for d in svc.get("CacheDirectory", "").split()]
    return [d.replace("%i", instance) for d in dirs]


def verify_root(tmp_path: Path) -> Path:
    """A root for `systemd-analyze verify --root`: the units, the executable, the host's targets."""
    root = tmp_path / "root"
    (root / "etc/systemd/system").mkdir(parents=True)
    for unit in (SINGLE, TEMPLATE, BRIDGE):
        shutil.copy(unit, root / "etc/systemd/system" / unit.name)
    for exe in (root / "opt/beltsight/.venv/bin/beltsight", root / "bin/kill"):  # ExecStart, ExecReload
        exe.parent.mkdir(parents=True)
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    # the host's units (targets the defaults depend on), as plain files: links would point outside
    shutil.copytree("/usr/lib/systemd/system", root / "usr/lib/systemd/system", ignore_dangling_symlinks=True)
    return root


def analyze(root: Path, *units: str) -> subprocess.CompletedProcess[str]:
    cmd = ["systemd-analyze", "verify", "--man=no", f"--root={root}"]
    cmd += [str(root / "etc/systemd/system" / u) for u in units]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed (Debian: systemd)")
def test_the_units_pass_systemd_analyze_verify_without_a_warning(tmp_path: Path) -> None:
    root = verify_root(tmp_path)
    result = analyze(
        root, "beltsight.service", "beltsight@0.service", "beltsight@3.service", "beltsight-bridge.service"
    )
    assert result.returncode == 0 and not (result.stdout + result.stderr).strip(), result.stdout + result.stderr
    # the check can fail: a misspelt hardening key is reported
    bad = root / "etc/systemd/system/beltsight-typo.service"
    bad.write_text(SINGLE.read_text().replace("ProtectSystem=strict", "ProtectSytem=strict"))
    typo = analyze(root, bad.name)
    assert "ProtectSytem" in typo.stdout + typo.stderr


def test_the_template_keeps_the_single_units_hardening_and_limits() -> None:
    single, template = service(SINGLE), service(TEMPLATE)
    for key in SAME_IN_BOTH:
        assert key in single, f"beltsight.service lacks {key}"
        assert template.get(key) == single[key], f"{key}: {template.get(key)!r} != {single[key]!r}"
    assert int(single["LimitNOFILE"]) > 1024
    assert "PrivateDevices" not in single and "PrivateDevices" not in template  # the GPU nodes stay visible


def test_reload_sends_sighup_to_the_daemon_and_its_lines_dir_default_is_writable() -> None:
    for unit in (SINGLE, TEMPLATE):
        assert service(unit)["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert "/var/lib/beltsight" in writable_dirs(SINGLE)  # [tracking] lines_dir = /var/lib/beltsight/lines


def test_the_bridge_unit_is_a_watched_notify_service_with_the_daemons_hardening() -> None:
    single, bridge = service(SINGLE), service(BRIDGE)
    for key in HARDENING:
        assert bridge.get(key) == single[key], f"{key}: {bridge.get(key)!r} != {single[key]!r}"
    assert bridge["Type"] == "notify" and bridge["NotifyAccess"] == "main"
    assert int(bridge["WatchdogSec"]) >= 5  # the heartbeat sends WATCHDOG=1 every second
    assert bridge["RestartPreventExitStatus"] == "78"  # an invalid config: restarting cannot help
    assert bridge["TimeoutStopSec"] == single["TimeoutStopSec"]  # the same shutdown_grace_s drains both
    assert bridge["ExecStart"] == "/opt/beltsight/.venv/bin/beltsight bridge -c /etc/beltsight/beltsight.toml"
    assert bridge["User"] == single["User"] and bridge["Group"] == single["Group"]
    assert bridge["Environment"].count("HOME=/var/lib/beltsight-bridge") == 1
    assert writable_dirs(BRIDGE) == ["/var/lib/beltsight-bridge"]  # the state_dir of the OPC UA certificates


def test_the_instance_selects_its_gpu_config_and_directories(monkeypatch: pytest.MonkeyPatch) -> None:
    svc = service(TEMPLATE)
    assert svc["ExecStart"].endswith(" run -c /etc/beltsight/%i.toml")
    env = environment(TEMPLATE, "1")
    assert env["BELTSIGHT_ENGINE__CUDA__DEVICE_ID"] == "1"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"  # CUDA's index is nvidia-smi's and NVML's
    for key, value in env.items():
        if key.startswith("BELTSIGHT_"):
            monkeypatch.setenv(key, value)
    settings = load_settings(ROOT / "configs/beltsight.toml")  # the example, as the installer copies it
    assert settings.engine.cuda.device_id == 1
    assert str(settings.redis.spool_dir) == "/var/lib/beltsight/1/spool"
    other = environment(TEMPLATE, "0")
    assert other["BELTSIGHT_REDIS__SPOOL_DIR"] != env["BELTSIGHT_REDIS__SPOOL_DIR"]  # never a shared spool


@pytest.mark.parametrize("unit", [SINGLE, TEMPLATE], ids=lambda p: p.name)
def test_everything_written_lands_where_protectsystem_strict_allows(unit: Path, tmp_path: Path) -> None:
    """HOME, the caches and the spool are inside the unit's StateDirectory/CacheDirectory, and a
    real ONNX Runtime session started with the unit's environment writes nowhere else."""
    allowed = writable_dirs(unit, "0")
    env = environment(unit, "0")
    for key in WRITABLE_ENV:
        if key in env:
            assert any(env[key] == d or env[key].startswith(d + "/") for d in allowed), f"{key}={env[key]}"
    sandbox = tmp_path / "fs"
    for d in allowed:  # systemd creates them; map them into the sandbox
        (sandbox / d.lstrip("/")).mkdir(parents=True, exist_ok=True)
    mapped = {k: str(sandbox / v.lstrip("/")) if v.startswith("/var/") else v for k, v in env.items()}
    run_env = {"PATH": os.environ.get("PATH", ""), **mapped}
    script = (
        "import onnxruntime as ort; "
        "ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider']); print('session ok')"
    )
    model = ROOT / "models/conveyor-416.onnx"
    result = subprocess.run(
        [sys.executable, "-c", f"import sys; {script}", str(model)],
        env=run_env,
        cwd=sandbox,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "session ok" in result.stdout, result.stderr[-2000:]
    written = [p for p in sandbox.rglob("*") if p.is_file()]
    assert written, "ONNX Runtime wrote nothing: the check would not see a write elsewhere"
    roots = [sandbox / d.lstrip("/") for d in allowed]
    assert all(any(root in p.parents for root in roots) for p in written)
    home = Path(mapped["HOME"])
    assert not (home / ".cache").exists()  # XDG_CACHE_HOME is honoured: the cache is in CacheDirectory


SCRIPT = ROOT / "tools/deploy/install-service.sh"


def test_the_install_script_is_valid_bash() -> None:
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True, timeout=30)
    if shutil.which("shellcheck"):
        result = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 0, result.stdout


def _seed_root(root: Path) -> None:
    (root / "etc").mkdir(parents=True)
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (root / "etc/group").write_text("root:x:0:\nvideo:x:44:\n")
    (root / "etc/shadow").write_text("root:*:19000:0:99999:7:::\n")
    (root / "etc/gshadow").write_text("root:*::\nvideo:*::\n")


def _install(root: Path) -> subprocess.CompletedProcess[str]:
    cmd = [str(SCRIPT), "--root", str(root), "--gpus", "0 1", "--pip-args", "--no-deps"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="useradd --prefix needs root")
def test_the_install_script_installs_everything_and_is_idempotent(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _seed_root(root)
    first = _install(root)
    assert first.returncode == 0, first.stdout + first.stderr
    config0 = root / "etc/beltsight/0.toml"
    config0.write_text(config0.read_text().replace("shutdown_grace_s = 10.0", "shutdown_grace_s = 7.0"))
    second = _install(root)
    assert second.returncode == 0, second.stdout + second.stderr
    passwd = (root / "etc/passwd").read_text().splitlines()
    (user,) = [line for line in passwd if line.startswith("beltsight:")]
    assert user.endswith(":/var/lib/beltsight:/usr/sbin/nologin")
    assert "beltsight" in next(g for g in (root / "etc/group").read_text().splitlines() if g.startswith("video:"))
    for unit in (SINGLE, TEMPLATE):
        assert (root / "etc/systemd/system" / unit.name).read_text() == unit.read_text()
    venv = root / "opt/beltsight/.venv"
    assert os.access(venv / "bin/beltsight", os.X_OK)
    assert sorted(p.name for p in (root / "opt/beltsight/models").glob("*.onnx"))
    assert "shutdown_grace_s = 7.0" in config0.read_text()  # the operator's edit survived
    config1 = (root / "etc/beltsight/1.toml").read_text()
    assert "/run/credentials/beltsight@1.service/redis-password" in config1
    assert 'listen = "127.0.0.1:9109"' in config1 and 'spool_dir = "/var/lib/beltsight/1/spool"' in config1
    assert load_settings(root / "etc/beltsight/1.toml").health.listen == "127.0.0.1:9109"
    for secret in ("redis-password", "camera-password"):
        assert (root / "etc/beltsight" / secret).stat().st_mode & 0o777 == 0o600


def test_startup_raises_the_soft_open_files_limit_to_the_hard_one() -> None:
    """As under systemd's default (soft 1,024): the process ends up with soft == hard."""
    script = (
        "import resource; from daemon.ops.fd_limit import raise_nofile_limit; "
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE); "
        "resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard)); "
        "r = raise_nofile_limit(); print(r.before, r.soft, r.hard, r.error, hard)"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    before, soft, hard, error, original_hard = out.stdout.split()
    assert (before, error) == ("256", "None")
    assert soft == hard == original_hard
