"""The ``fim`` check: how the sidecar will send the prompt (``choose_strategy``: native
``suffix``, a FIM ``template``, ``chat`` or ``prefix`` only). For SiliconFlow's native FIM
one tiny streamed ``/completions`` request with a ``suffix`` and ``max_tokens`` 1 checks
that the model takes it; the value gives its time in milliseconds.

WARN: the model refused the suffix (the line names the strategy the sidecar falls back
to), or a rate limit / overload during the probe. FAIL: no answer within ``--timeout``
seconds, or an error no completion could survive (see probe.py). The strategy found here
is the one the TTFT check uses. See docs/architecture.md (``completion/``, ``tools/``).
"""

from __future__ import annotations

import time
from typing import Any

from .base import FAIL, OK, WARN, _CheckMixin, _ms
from .probe import _PREFIX, _SUFFIX


class FimCheck(_CheckMixin):
    """``check_fim``, a method of :class:`~sidecar.tools.doctor.core.Doctor`."""

    async def check_fim(self, backend: Any) -> None:
        from ...backends import errors as E
        from ...backends.base import UpstreamRequest
        from ...completion.dialects import dialect_for
        from ...completion.prompts import choose_strategy, template_for

        s = self.settings
        assert s is not None
        api, model = backend.api, backend.model
        native = dialect_for(api).native_fim  # the API's list of native-FIM models, if it has one
        strategy = choose_strategy(api, model, s.fim)
        self.strategy = strategy
        data: dict[str, Any] = {"strategy": strategy, "fim_setting": s.fim}
        if not (native is not None and strategy == "suffix"):
            tmpl = template_for(model)
            how = {
                "suffix": "native FIM field 'suffix' on /completions",
                "template": f"FIM prompt from the {tmpl.family if tmpl else 'model'} family's tokens on /completions",
                "chat": "chat (/chat/completions) with prefix and suffix",
                "prefix": "prefix only on /completions (the model's family has no known FIM tokens; "
                "text after the cursor is not sent)",
            }.get(strategy, strategy)
            note = ""
            if native is not None and not native.search(model) and s.fim == "auto":
                note = " (not on SiliconFlow's FIM list)"
            self.add("fim", "FIM", OK, f"strategy {strategy}: {how}{note}", "", data)
            return
        fallback = choose_strategy(api, model, s.fim, frozenset({"suffix"}))
        data["fallback"] = fallback
        req = UpstreamRequest(
            "completions", {"prompt": _PREFIX, "suffix": _SUFFIX, "max_tokens": 1, "temperature": 0.0}, "suffix"
        )
        t0 = time.perf_counter()
        try:
            info, _text = await self._first_token(backend, req)
        except E.BackendError as err:
            if err.kind == E.FIM_UNSUPPORTED:
                self.strategy = fallback
                self.add(
                    "fim",
                    "FIM",
                    WARN,
                    f"'{model}' refused the FIM suffix (HTTP {err.status}: {err.detail[:120]})",
                    f"The model does not accept a FIM suffix; the sidecar will use {fallback} instead "
                    f"(set SIDECAR_FIM={fallback} to skip the failed first try, or pick a model on "
                    f"SiliconFlow's FIM list).",
                    {**data, "status": err.status},
                )
                return
            self._error_check("fim", "FIM", err, "the FIM probe", data)
            return
        except TimeoutError:
            self.add(
                "fim",
                "FIM",
                FAIL,
                f"no answer to the FIM probe within {self.timeout_s:g} s",
                "The server accepted the connection but did not answer; try again, or pick another model.",
                data,
            )
            return
        data["ms"] = _ms(time.perf_counter() - t0)
        data["trace_id"] = info.trace_id
        self.add(
            "fim", "FIM", OK, f"native FIM accepted: prompt + suffix on /completions ({data['ms']:.0f} ms)", "", data
        )
