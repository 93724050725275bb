"""The lifecycle shared by the test services: start() / stop(), also as a context manager, and
the scaffolding of the ones that run a child process (log file, readiness wait, stop/kill)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from tracescore.testing._tools import stop_process_group, wait_for_process

if TYPE_CHECKING:
    from typing_extensions import Self


class Service:
    """Base of the test services: `with Service() as s:` is `s.start()`, then `s.stop()` at the end."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class LoopbackOTLP:
    """The OTLP endpoints of a service listening on loopback `grpc_port` and `http_port`."""

    grpc_port: int
    http_port: int

    @property
    def grpc_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.grpc_port}"

    @property
    def http_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def traces_url(self) -> str:
        """OTLP/HTTP traces endpoint."""
        return f"{self.http_endpoint}/v1/traces"


class ChildProcess(Service):
    """A service run as a child process in its own session: output into a log file in a
    temporary directory (`workdir`), `start()` waits until it is ready (a failure stops it and
    ends with the log's tail), `stop()` sends SIGTERM to its group and SIGKILL after
    `stop_grace_s`."""

    what: ClassVar[str]  # its name in errors, the log file and the temporary directory
    stop_grace_s: ClassVar[float] = 10.0
    _process: subprocess.Popen[bytes] | None = None
    _tmp: tempfile.TemporaryDirectory[str] | None = None
    _log_path: Path | None = None
    returncode: int | None = None  # the exit status, once stopped

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def log_path(self) -> Path:
        return self._log_path or self.workdir / f"{self.what}.log"

    @property
    def workdir(self) -> Path:
        """The temporary directory (made on first use; removed by stop())."""
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix=f"tracescore-{self.what}-")
        return Path(self._tmp.name)

    def log(self) -> str:
        """What it wrote so far ("" before start)."""
        if self._tmp is None and self._log_path is None:
            return ""
        return self.log_path.read_text(errors="replace")

    def _launch(self, command: Sequence[str], *, ready: Callable[[], bool], timeout: float,
                env: Mapping[str, str] | None = None, **popen: Any) -> None:
        """Start `command` with its output into `log_path`; return once `ready()`."""
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                list(command), stdout=log, stderr=subprocess.STDOUT,
                env=dict(os.environ if env is None else env), start_new_session=True, **popen,
            )
        try:
            wait_for_process(ready, self._process, timeout=timeout, what=self.what,
                             log_path=self.log_path)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        process, self._process = self._process, None
        stop_process_group(process, grace=self.stop_grace_s)
        if process is not None:
            self.returncode = process.returncode
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
