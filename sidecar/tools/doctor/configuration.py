"""The ``config`` check: the config file and the environment load, as ``sidecar config``
resolves them. It measures nothing over the network; the value lists mode, provider, base
URL, model, whether an API key is set (present/absent: the key itself is never printed),
the local engine, the cache path and the config file.

FAIL: the configuration did not load (the error names the setting), a cloud provider
without a base URL, or a provider that needs an API key (SiliconFlow) without one. It
never WARNs.

The ``config_ignored`` check (only when there is something to say) WARNs with what the
settings were resolved without, as ``serve`` resolves them (``sidecar/cli.py``
``resolve_settings``): a bad value, settings that contradict each other
(``debounce_min_ms`` above ``debounce_max_ms``), a config file that cannot be read at
all. The other checks run on the rest. See docs/architecture.md (``config/``,
``tools/``).
"""

from __future__ import annotations

from ... import config
from .base import FAIL, INFO, OK, WARN, _CheckMixin


class ConfigCheck(_CheckMixin):
    """The ``config`` check, a method of :class:`~sidecar.tools.doctor.core.Doctor`."""

    def check_config(self) -> None:
        path = config.config_file_path()
        file_note = f"{path}" + ("" if path.exists() else " (not found, defaults used)")
        if self.settings is None:
            self.add(
                "config",
                "configuration",
                FAIL,
                self.config_error or "invalid configuration",
                f"Fix that setting in {path} or in the environment; `sidecar config` shows what is resolved.",
                {"config_file": str(path)},
            )
            return
        s = self.settings
        data = {
            "config_file": str(path),
            "config_file_exists": path.exists(),
            "mode": s.resolved_mode,
            "provider": s.cloud_provider,
            "base_url": s.resolved_base_url,
            "model": s.resolved_model if s.cloud_provider else None,
            "api_key": "present" if s.api_key else "absent",
            "local_engine": s.local_engine,
            "cache_path": str(s.resolved_cache_path) if s.cache_enabled else None,
        }
        if s.cloud_provider:
            cloud_text = f"provider {s.cloud_provider}, base URL {s.resolved_base_url}, model {s.resolved_model}"
            if s.provider_note:  # SILICONFLOW_API_KEY with a host that is not SiliconFlow's
                cloud_text += f" ({s.provider_note})"
                data["provider_note"] = s.provider_note
        else:
            cloud_text = "no cloud backend"
        value = (
            f"mode {s.resolved_mode}, {cloud_text}, API key {data['api_key']}, local engine {s.local_engine}, "
            f"cache {data['cache_path'] or 'off'}; config file {file_note}"
        )
        cloud = s.cloud
        if cloud is not None and not s.resolved_base_url:
            self.add(
                "config",
                "configuration",
                FAIL,
                value,
                f"provider '{cloud.name}' needs a base URL: set SIDECAR_BASE_URL (or base_url in the config file).",
                data,
            )
            return
        if cloud is not None and cloud.needs_key and not s.api_key:
            key_var = cloud.key_env or "SIDECAR_API_KEY"
            self.add(
                "config",
                "configuration",
                FAIL,
                value,
                f"{cloud.label} needs an API key: set {key_var} (or api_key in the config file).",
                data,
            )
            return
        self.add("config", "configuration", OK, value, "", data)

    def check_exclusion(self) -> None:
        """INFO: the content-exclusion rules in force for the current folder (taken as
        the workspace folder), the user's ``.sidecarignore`` and ``ignore_paths``
        (``completion/crossfile/exclusion.py``)."""
        import os

        from ...completion.crossfile.exclusion import IGNORE_FILE, ContentExclusion

        s = self.settings
        config_dir = config.config_file_path().parent
        rules = ContentExclusion(config_dir, s.ignore_paths if s is not None else ())
        folder = os.getcwd()
        rules.set_folders([folder])
        lines = rules.describe()
        cloud = s is not None and s.cloud_provider is not None
        if lines:
            value = "; ".join(lines) + (
                ". Those files are never indexed nor put in a prompt"
                + (", and no completion is requested from the cloud in them" if cloud else "")
            )
        else:
            places = ", ".join(dict.fromkeys([os.path.join(folder, IGNORE_FILE), str(config_dir / IGNORE_FILE)]))
            value = (
                f"no rules: files to keep out of prompts (and, with a cloud backend, out of every request) go in "
                f"{places} or the ignore_paths setting (gitignore syntax)"
            )
        status, fix = INFO, ""
        if rules.has_problems():
            status = WARN
            fix = "Fix or remove the lines named (the server log names each with its reason); the other rules apply."
        self.add("exclusion", "content exclusion", status, value, fix, {"rules": lines, "folder": folder})

    def check_ignored(self) -> None:
        ignored = getattr(self, "ignored", [])
        if not ignored:
            return
        path = config.config_file_path()
        self.add(
            "config_ignored",
            "ignored settings",
            WARN,
            "; ".join(ignored),
            f"Fix or remove them in {path} or in the environment (the sidecar runs without them, as these "
            f"checks did); `sidecar config` shows what is resolved.",
            {"ignored": list(ignored)},
        )
