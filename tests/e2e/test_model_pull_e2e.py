"""``python -m sidecar model pull`` as a real process against a real PEP 691 index on
127.0.0.1 (support/model_index.py): killed in the middle of a slow download, then run
again, it resumes with a Range request and installs the verified file."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

from conftest import ROOT, sidecar_env
from support.model_index import IndexServer, publish_model


def test_killed_pull_resumes_and_installs(tmp_path: Path):
    server = IndexServer()
    try:
        raw = publish_model(server)
        extra = tmp_path / "extra.json"
        extra.write_text(json.dumps([raw]))
        models = tmp_path / "models"
        env = sidecar_env(
            tmp_path,
            SIDECAR_MODELS_DIR=str(models),
            SIDECAR_MODEL_INDEX_URL=server.url,
            SIDECAR_MODEL_CATALOG_EXTRA=str(extra),
        )
        cmd = [sys.executable, "-m", "sidecar", "model", "pull", "synthetic"]

        server.trickle_s = 0.05  # 512 bytes every 50 ms: each wheel takes seconds
        proc = subprocess.Popen(cmd, env=env, cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        partial = models / ".partial" / "synthetic"
        deadline = time.monotonic() + 30
        try:
            while not any(p.name.endswith(".part") and p.stat().st_size >= 2048 for p in partial.glob("*.part")):
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "the download never started"
                time.sleep(0.02)
        finally:
            proc.kill()
            proc.communicate()
        assert not (models / raw["file_name"]).exists()
        kept = {p.name: p.stat().st_size for p in partial.glob("*.part")}
        assert kept and all(size > 0 for size in kept.values())

        server.trickle_s = 0.0
        done = subprocess.run(cmd, env=env, cwd=str(ROOT), capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        path = Path(done.stdout.strip())
        assert path == models / raw["file_name"]
        assert hashlib.sha256(path.read_bytes()).hexdigest() == raw["sha256"]
        assert "download part" in done.stderr and "Traceback" not in done.stderr
        ranges = [rng for p, rng in server.requests if p.startswith("/files/") and rng]
        assert any(rng == f"bytes={size}-" for rng in ranges for size in kept.values()), (ranges, kept)
        assert not partial.exists() and sorted(p.name for p in models.iterdir() if not p.name.endswith(".lock")) == [
            raw["file_name"],
            raw["file_name"] + ".verified",
        ]

        again = subprocess.run(
            [sys.executable, "-m", "sidecar", "model", "path", "synthetic"],
            env=env,
            cwd=str(ROOT),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert again.returncode == 0 and again.stdout.strip() == str(path)
    finally:
        server.close()
