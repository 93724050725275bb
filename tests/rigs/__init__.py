"""The suite's rigs: real outside software its tests and benchmarks run, not shipped in the wheel.

Phoenix (`phoenix`, also `make phoenix` / `make demo-phoenix`), rotel (`rotel`), headless
Chromium (`browser`), and the real agent libraries of other conventions and frameworks in cached
side environments (`conventions`, `python_frameworks`, `side_envs`, built up front by
`make side-envs`; the scripts those environments run are in `agents/`). Imported as `rigs` with
`tests/` on `sys.path` (pytest puts it there; the benchmarks and the Makefile do the same).
What users' own suites need stays in `tracescore.testing`.
"""
