"""The ``engine`` check: a real run of the local engine. For the managed engine it starts
:class:`~sidecar.backends.managed_engine.ManagedEngine` in its own process as the sidecar
does (its ~180-token warm-up included), streams one ~330-token prompt for 16 tokens and
stops it: start-up in seconds, warm-up, time to the first token and total in
milliseconds, tokens/s. For an external engine (llama-server, Ollama) it waits until it
is ready and times a first token as the sidecar would send it. It runs by default whenever
the managed engine is set up; ``--no-engine`` skips it, ``--engine`` also runs an
external engine that is not in use; ``--engine-timeout`` (seconds) bounds it.

Managed engine: FAIL (WARN when the local engine is not in use and ``--engine`` was not
given) when it crashes (the signal, e.g. SIGSEGV on CPUs with Intel AMX, the engine log
and the fix are named), exits, or does not finish within the bound. External engine: FAIL
when it has no ``local_url``, answers with an error, or is not ready in time. WARN: no
text came back, or the first token took longer than ``SLOW_ENGINE_TTFT_MS`` (3000 ms,
managed) or ``SLOW_TTFT_MS`` (1500 ms, external). SKIP: ``--no-engine``, an external
engine not in use, or a managed engine that is not set up. See docs/architecture.md
(``backends/``, ``tools/``).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx2 as httpx

from .base import FAIL, OK, SKIP, SLOW_TTFT_MS, WARN, _cause, _CheckMixin, _signal_name

#: The engine check's prompt (``warmup_prompt(ENGINE_CHECK_FUNCTIONS)``, ~330 tokens) and length.
ENGINE_CHECK_FUNCTIONS = 4
ENGINE_CHECK_MAX_TOKENS = 16
#: Above this time to the first token of the ~330-token check prompt the engine check warns.
SLOW_ENGINE_TTFT_MS = 3000.0


class EngineRunCheck(_CheckMixin):
    """``check_engine_run``, a method of :class:`~sidecar.tools.doctor.core.Doctor`."""

    async def check_engine_run(self) -> None:
        """The ``engine`` check: a real multi-token completion on the local engine (see the
        module's docstring); SKIP with the reason when it is not run."""
        s = self.settings
        assert s is not None
        if self.start_engine is False:
            self.add("engine", "engine run", SKIP, "not run (--no-engine)", "", {"engine": s.local_engine})
            return
        if not s.engine.managed:
            if self._uses_local() or self.start_engine:
                await self._external_engine_run()
            else:
                self.add(
                    "engine",
                    "engine run",
                    SKIP,
                    f"not run: the external {s.local_engine} is not in use (doctor --engine tests it)",
                    "",
                    {"engine": s.local_engine},
                )
            return
        if not self.engine_setup_ok:
            self.add(
                "engine",
                "engine run",
                SKIP,
                "not run: the local engine is not set up (see local engine)",
                "",
                {"engine": s.local_engine},
            )
            return
        await self._managed_engine_run()

    async def _managed_engine_run(self) -> None:
        """Start the managed engine in its own process exactly as the sidecar does (its
        ~180-token warm-up included), stream one ~330-token prompt for 16 tokens, stop it.

        FAIL (WARN when the local engine is not in use) when it crashes, exits or does not
        answer within ``engine_timeout_s`` seconds overall."""
        from ...backends.engine_setup import CRASH_FIX
        from ...backends.engine_start import EngineStartError, describe_exit, warmup_prompt
        from ...backends.errors import BackendError
        from ...backends.managed_engine import ManagedEngine

        s = self.settings
        assert s is not None
        bad = FAIL if self._uses_local() or self.start_engine else WARN
        from ...models.select import choose

        choice = choose(s.local_model, s.local_model_path)
        engine = ManagedEngine(
            str(choice.path) if choice.path else None,
            n_ctx=s.local_n_ctx,
            n_gpu_layers=s.local_n_gpu_layers,
            threads=s.local_threads,
            secrets=(s.api_key,),
        )
        budget = self.engine_timeout_s
        data: dict[str, Any] = {
            "engine": s.local_engine,
            "log_path": str(engine.log_path),
            "used": self._uses_local(),
            "check_prompt": f"warmup_prompt({ENGINE_CHECK_FUNCTIONS})",
            "max_tokens": ENGINE_CHECK_MAX_TOKENS,
            "timeout_s": budget,
        }
        data["model"] = choice.name
        if choice.error:
            self.add("engine", "engine run", bad, choice.error, "See the local engine check.", data)
            return
        fix_crash = CRASH_FIX[0].upper() + CRASH_FIX[1:] + "."
        phase = "start-up"
        t0 = time.perf_counter()

        def crashed(code: int | None, during: str) -> None:
            data.update(returncode=code, crashed=True, phase=during, signal=_signal_name(code))
            self.add(
                "engine",
                "engine run",
                bad,
                f"the local engine {describe_exit(code)} during {during}; its log is {engine.log_path}",
                fix_crash,
                data,
            )

        try:

            async def run() -> tuple[float | None, float, int, str]:
                nonlocal phase
                engine.spawn()
                phase = "loading and warm-up"
                await engine.wait_ready(max(1.0, budget - (time.perf_counter() - t0)))
                data["ready_s"] = round(engine.ready_at - engine.started_at, 2)
                data["warmup_ms"] = round(engine.warmup_ms or 0.0, 1)
                phase = "the check prompt"
                return await self._stream_check_prompt(engine, warmup_prompt(ENGINE_CHECK_FUNCTIONS))

            try:
                ttft_ms, total_ms, tokens, text = await asyncio.wait_for(run(), budget)
            except TimeoutError:  # (before OSError: TimeoutError is one)
                if engine.proc is not None and engine.proc.poll() is not None:
                    crashed(engine.proc.returncode, phase)
                    return
                self.add(
                    "engine",
                    "engine run",
                    bad,
                    f"the local engine did not finish {phase} within {budget:g} s; its log is {engine.log_path}",
                    "Use a smaller model or offload to a GPU (local_n_gpu_layers), or read the engine log.",
                    data,
                )
                return
            except (httpx.HTTPError, OSError) as exc:
                # A crash closes the connection a moment before the exit status is in.
                for _ in range(40):
                    if not engine.alive():
                        break
                    await asyncio.sleep(0.05)
                if engine.proc is not None and not engine.alive():
                    crashed(engine.proc.returncode, "the check prompt (~330 tokens)")
                else:
                    data["error"] = _cause(exc)
                    self.add(
                        "engine",
                        "engine run",
                        bad,
                        f"the check prompt failed: {_cause(exc)}; the engine log is {engine.log_path}",
                        "Read the engine log; try again, or a smaller model.",
                        data,
                    )
                return
            except EngineStartError as err:
                if err.crashed:
                    crashed(
                        err.returncode, "its warm-up (a ~180-token prompt)" if "warm-up" in err.message else "start-up"
                    )
                else:
                    data.update(returncode=err.returncode, crashed=False)
                    self.add(
                        "engine",
                        "engine run",
                        bad,
                        err.message,
                        "Read the engine log; check the model file and local_n_ctx / local_n_gpu_layers.",
                        data,
                    )
                return
            except BackendError as err:  # not installed, model missing or not a GGUF
                data["kind"] = err.kind
                self.add("engine", "engine run", bad, err.message, "See the local engine check.", data)
                return
        finally:
            await asyncio.to_thread(engine.stop_sync)
        tps = None  # decode speed: the tokens after the first over the time after it
        if ttft_ms is not None and tokens > 1 and total_ms > ttft_ms:
            tps = (tokens - 1) / ((total_ms - ttft_ms) / 1000)
        data.update(
            ttft_ms=None if ttft_ms is None else round(ttft_ms, 1),
            total_ms=round(total_ms, 1),
            tokens=tokens,
            tokens_per_s=None if tps is None else round(tps, 1),
            crashed=False,
        )
        head = f"{choice.name} ready in {data['ready_s']:.1f} s (warm-up {data['warmup_ms']:.0f} ms)"
        if ttft_ms is None or not tokens:
            self.add(
                "engine",
                "engine run",
                WARN,
                f"{head}, but the ~330-token prompt got no text back",
                "Check that the local model is a code or instruct model.",
                data,
            )
            return
        # The text shows the figures as stored in ``data`` (rounded to 0.1 ms first), so the
        # two never disagree by a rounding step (505.46 ms: "505" against 505.5 -> "506").
        value = (
            f"{head}; ~330-token prompt: first token in {data['ttft_ms']:.0f} ms, {tokens} tokens in "
            f"{data['total_ms']:.0f} ms" + (f", {data['tokens_per_s']:.0f} tokens/s" if tps is not None else "")
        )
        if ttft_ms > SLOW_ENGINE_TTFT_MS:
            self.add(
                "engine",
                "engine run",
                WARN,
                value,
                f"Slow: above {SLOW_ENGINE_TTFT_MS:.0f} ms to the first token; use a smaller model, more threads "
                f"(local_threads), or offload to a GPU (local_n_gpu_layers).",
                data,
            )
        else:
            self.add("engine", "engine run", OK, value, "", data)

    async def _stream_check_prompt(self, engine: Any, prompt: str) -> tuple[float | None, float, int, str]:
        """Stream ``prompt`` from the engine's ``/completions``; returns (time to the first
        text in ms or None, total ms, text chunks (tokens), text). Raises httpx.HTTPError."""
        body = {"prompt": prompt, "max_tokens": ENGINE_CHECK_MAX_TOKENS, "temperature": 0.0, "stream": True}
        ttft: float | None = None
        tokens = 0
        text = ""
        async with httpx.AsyncClient(
            timeout=httpx.Timeout(self.engine_timeout_s, connect=5.0), trust_env=False
        ) as client:
            t0 = time.perf_counter()
            async with client.stream("POST", f"{engine.base_url}/completions", json=body) as resp:
                if resp.status_code != 200:
                    await resp.aread()
                    raise httpx.HTTPStatusError(
                        f"HTTP {resp.status_code}: {resp.text[:200]}", request=resp.request, response=resp
                    )
                async for line in resp.aiter_lines():
                    if not line.startswith("data:"):
                        continue  # blank lines and ": ping" comments
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        break
                    try:
                        choice = (json.loads(payload).get("choices") or [{}])[0]
                    except (ValueError, AttributeError, IndexError):
                        continue
                    piece = choice.get("text") or ""
                    if piece:
                        tokens += 1
                        text += piece
                        if ttft is None:
                            ttft = (time.perf_counter() - t0) * 1000
            total = (time.perf_counter() - t0) * 1000
        return ttft, total, tokens, text

    async def _external_engine_run(self) -> None:
        """An external local engine (llama-server, Ollama, ...): wait until it is ready and
        time a first token, as the sidecar would send it."""
        from ...backends import errors as E
        from ...backends.factory import build_local
        from ...completion.prompts import build_request, choose_strategy

        s = self.settings
        assert s is not None
        if not s.local_url:
            self.add(
                "engine",
                "engine run",
                FAIL,
                f"local_engine '{s.local_engine}' has no local_url",
                "Set SIDECAR_LOCAL_URL to the engine's URL.",
                {"engine": s.local_engine},
            )
            return
        backend = build_local(s)
        ready_timeout = max(self.timeout_s, s.cold_start_timeout_ms / 1000)
        data: dict[str, Any] = {"engine": s.local_engine}
        try:
            t0 = time.perf_counter()
            await asyncio.wait_for(backend.ensure_ready(), ready_timeout)
            data["ready_s"] = round(time.perf_counter() - t0, 2)
            strategy = choose_strategy(backend.api, backend.model, s.fim)
            req = build_request(
                self._context(), strategy, api=backend.api, model=backend.model, max_tokens=8, temperature=0.0
            )
            info, text = await self._first_token(backend, req)
        except E.BackendError as err:
            self.add(
                "engine",
                "engine run",
                FAIL,
                f"the local engine failed: {err.message}",
                f"Check that {s.local_engine} runs at {s.local_url} and serves the model.",
                {**data, "kind": err.kind},
            )
            return
        except TimeoutError:
            self.add(
                "engine",
                "engine run",
                FAIL,
                "the local engine did not answer in time",
                "Raise cold_start_timeout_ms or --timeout, or use a smaller model.",
                data,
            )
            return
        finally:
            await backend.aclose()
        ttft = info.ttft_ms
        data.update(ttft_ms=round(ttft, 1) if ttft is not None else None, strategy=strategy)
        if ttft is None or not text:
            self.add(
                "engine",
                "engine run",
                WARN,
                f"ready in {data['ready_s']:.1f} s, but the answer had no text",
                "Check that the local model is a code or instruct model.",
                data,
            )
            return
        value = f"ready in {data['ready_s']:.1f} s, first token in {data['ttft_ms']:.0f} ms"
        if ttft > SLOW_TTFT_MS:
            self.add(
                "engine",
                "engine run",
                WARN,
                value,
                "The local engine is slow to answer: use a smaller model, or offload to a GPU.",
                data,
            )
        else:
            self.add("engine", "engine run", OK, value, "", data)
