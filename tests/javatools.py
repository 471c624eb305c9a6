"""Run Apache RocketMQ's own Java code from the test suite: the oracle that proves our bytes are RocketMQ's.

Maven resolves the runtime classpath of released artifacts from Maven Central, javac compiles the small programs
under ``tests/java/<name>/`` against it (with the sources of shared directories such as ``tests/java/common/`` when
asked), and the JVM runs them as subprocesses. Everything built is cached under ``$RMQ_TEST_CACHE`` (default
``~/.cache/rmq-tests``), so only the first run pays for downloads and compilation; content-named jars and AppCDS
archives (``content_jar``, ``cds_archive``) take the JVM's start-up cost down for programs run many times.

Examples:
    >>> jars = [rocketmq_artifact("rocketmq-common"), rocketmq_artifact("rocketmq-store")]
    >>> program = build_program("codec", "CodecOracle", jars)  # doctest: +SKIP
    >>> program.run("decode", "records.bin").stdout  # doctest: +SKIP
    >>> namesrv = JavaProgram(resolve_classpath([rocketmq_artifact("rocketmq-namesrv")]),
    ...                       "org.apache.rocketmq.namesrv.NamesrvStartup")
    >>> proc = namesrv.start()  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import threading
import time
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROCKETMQ_VERSION = "5.5.1"
ROCKETMQ_GROUP = "org.apache.rocketmq"
JAVA_SOURCES = Path(__file__).parent / "java"
# Pinned so the classpath does not depend on which plugin version Maven happens to pick by default.
DEPENDENCY_PLUGIN_VERSION = "3.8.1"
MAVEN_TIMEOUT_S = 900
JAVAC_TIMEOUT_S = 300
RUN_TIMEOUT_S = 300

_POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>rmq.tests</groupId>
  <artifactId>classpath-{key}</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-dependency-plugin</artifactId>
        <version>{plugin_version}</version>
      </plugin>
    </plugins>
  </build>
</project>
"""
_DEPENDENCY = "    <dependency><groupId>{}</groupId><artifactId>{}</artifactId><version>{}</version></dependency>"


class JavaToolError(RuntimeError):
    """Java, javac or Maven is missing or failed; the message says which command and shows its output."""


def rocketmq_artifact(artifact_id: str, version: str = ROCKETMQ_VERSION) -> str:
    return f"{ROCKETMQ_GROUP}:{artifact_id}:{version}"


def cache_dir() -> Path:
    root = os.environ.get("RMQ_TEST_CACHE") or Path.home() / ".cache" / "rmq-tests"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def require_tools(*names: str) -> None:
    """Fail with one clear message naming every missing tool (CI installs them; a developer may not have)."""
    missing = [name for name in names if shutil.which(name) is None]
    if missing:
        raise JavaToolError(
            f"{', '.join(missing)} not found on PATH: the Java interop tests need a JDK (17+) and Maven 3 "
            "(Debian: apt-get install openjdk-17-jdk-headless maven)"
        )


@contextlib.contextmanager
def _exclusive(path: Path):
    """One builder at a time per cache entry, across processes (parallel test workers share the cache): the
    others wait, then find the entry built."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _key(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _pom(artifacts: Sequence[str], key: str) -> str:
    deps = []
    for coordinate in artifacts:
        parts = coordinate.split(":")
        if len(parts) != 3 or not all(parts):
            raise ValueError(f"artifact {coordinate!r} is not groupId:artifactId:version")
        deps.append(_DEPENDENCY.format(*parts))
    return _POM.format(key=key, dependencies="\n".join(deps), plugin_version=DEPENDENCY_PLUGIN_VERSION)


def _run_tool(cmd: list[str], what: str, timeout: float, cwd: Path | None = None) -> None:
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as err:
        raise JavaToolError(f"{what} timed out after {timeout}s: {' '.join(cmd)}") from err
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip()[-4000:]
        raise JavaToolError(f"{what} failed (exit {done.returncode}): {' '.join(cmd)}\n{output}")


def sources_jar(group: str, artifact: str, version: str) -> Path:
    """The sources jar of ``group:artifact:version`` in the local Maven repository, fetched (once across test
    workers) when it is not there yet."""
    jar = (Path.home() / ".m2" / "repository" / group.replace(".", "/") / artifact / version
           / f"{artifact}-{version}-sources.jar")
    with _exclusive(cache_dir() / "sources" / _key(group, artifact, version)):
        if not jar.exists():
            require_tools("mvn")
            _run_tool(["mvn", "-q", "-B", "-Dstyle.color=never",
                       f"org.apache.maven.plugins:maven-dependency-plugin:{DEPENDENCY_PLUGIN_VERSION}:get",
                       f"-Dartifact={group}:{artifact}:{version}:jar:sources", "-Dtransitive=false"],
                      f"Maven fetching the sources of {group}:{artifact}:{version}", MAVEN_TIMEOUT_S, cwd=cache_dir())
        if not jar.exists():
            raise JavaToolError(f"Maven fetched the sources of {group}:{artifact}:{version} but {jar} is missing")
    return jar


def resolve_classpath(artifacts: Sequence[str]) -> str:
    """The runtime classpath (``os.pathsep`` separated jars) of ``groupId:artifactId:version`` artifacts.

    Cached per artifact list; a cached classpath whose jars have vanished (a cleaned ~/.m2) is resolved again."""
    require_tools("mvn")
    key = _key(*artifacts)
    work = cache_dir() / "classpath" / key
    with _exclusive(work):
        return _resolve_classpath(artifacts, key, work)


def _resolve_classpath(artifacts: Sequence[str], key: str, work: Path) -> str:
    result = work / "classpath.txt"
    if result.exists():
        classpath = result.read_text().strip()
        if classpath and all(Path(jar).exists() for jar in classpath.split(os.pathsep)):
            return classpath
    work.mkdir(parents=True, exist_ok=True)
    (work / "pom.xml").write_text(_pom(artifacts, key))
    partial = work / f"classpath.{os.getpid()}.tmp"
    _run_tool(
        [
            "mvn",
            "-q",
            "-B",
            "-Dstyle.color=never",
            "-f",
            str(work / "pom.xml"),
            "dependency:build-classpath",
            f"-Dmdep.outputFile={partial}",
        ],
        f"Maven resolving {', '.join(artifacts)}",
        MAVEN_TIMEOUT_S,
    )
    if not partial.exists():
        raise JavaToolError(f"Maven resolving {', '.join(artifacts)} wrote no classpath to {partial}")
    partial.replace(result)  # atomic, so a concurrent run never reads half a file
    return result.read_text().strip()


def compile_java(name: str, classpath: str, *, shared: Sequence[str] = ()) -> Path:
    """Compile ``tests/java/<name>/*.java``, plus those of each ``tests/java/<shared>/``, against ``classpath``;
    returns the classes directory.

    The directory is named by the classpath and the sources' content, so it is compiled once per version of them
    (and two checkouts with different sources never share one)."""
    require_tools("javac")
    sources = sorted((JAVA_SOURCES / name).glob("*.java"))
    if not sources:
        raise JavaToolError(f"no Java sources in {JAVA_SOURCES / name}")
    for directory in shared:
        sources += sorted((JAVA_SOURCES / directory).glob("*.java"))
    content = [f"{src.relative_to(JAVA_SOURCES).as_posix()}:{hashlib.sha256(src.read_bytes()).hexdigest()}"
               for src in sources]
    out = cache_dir() / "classes" / f"{name}-{_key(classpath, *content)}"
    stamp = out / ".compiled"
    if stamp.exists():
        return out
    with _exclusive(out):
        if not stamp.exists():
            out.mkdir(parents=True, exist_ok=True)
            _run_tool(
                ["javac", "-encoding", "UTF-8", "-nowarn", "-d", str(out), "-cp", classpath, *map(str, sources)],
                f"javac compiling {JAVA_SOURCES / name}",
                JAVAC_TIMEOUT_S,
            )
            stamp.touch()
    return out


def content_jar(name: str, classes: Path, members: list[Path]) -> Path:
    """A jar of ``members`` (class files under ``classes``) named by their content, so an unchanged set keeps its
    path. Jars rather than class directories because AppCDS refuses non-empty directories on the classpath."""
    digest = hashlib.sha256()
    for path in members:
        digest.update(path.relative_to(classes).as_posix().encode() + b"\0" + path.read_bytes())
    jar = cache_dir() / "jars" / f"{name}-{digest.hexdigest()[:16]}.jar"
    if not jar.exists():
        jar.parent.mkdir(parents=True, exist_ok=True)
        partial = jar.with_suffix(f".{os.getpid()}.tmp")
        with zipfile.ZipFile(partial, "w") as zf:
            for path in members:
                zf.write(path, path.relative_to(classes).as_posix())
        partial.replace(jar)
    return jar


# -- AppCDS -----------------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class CdsArchive:
    """Flags that use the archive if it exists, else dump one at exit into a private file renamed on success."""

    jvm_args: tuple[str, ...]
    pending: Path | None = None
    final: Path | None = None
    # Only a run that did the usual work is worth archiving: a driver that failed early loaded few classes.
    good_exits: tuple[int, ...] = (0, 128 + signal.SIGTERM)

    def commit(self, returncode: int | None) -> None:
        """Publish a freshly dumped archive, only from a JVM that exited normally (not killed mid-dump, not failed)."""
        if self.pending is None or self.final is None:
            return
        if returncode in self.good_exits and self.pending.exists():
            self.pending.replace(self.final)
        else:
            self.pending.unlink(missing_ok=True)
        self.pending = None


def cds_archive(tag: str, classpath: str) -> CdsArchive:
    """The AppCDS archive of ``classpath`` (and this JDK): used when it exists, else dumped by this run
    (``RMQ_TEST_CDS=0`` turns archives off)."""
    if os.environ.get("RMQ_TEST_CDS", "1") == "0":
        return CdsArchive(())
    java = Path(shutil.which("java") or "java").resolve()
    identity = f"{java}:{java.stat().st_mtime_ns if java.exists() else 0}\n{classpath}"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    final = cache_dir() / "cds" / f"{tag}-{digest}.jsa"
    if final.exists():
        return CdsArchive((f"-XX:SharedArchiveFile={final}",))
    final.parent.mkdir(parents=True, exist_ok=True)
    pending = final.with_name(f"{final.name}.{os.getpid()}.{threading.get_ident()}.{time.monotonic_ns()}.tmp")
    return CdsArchive((f"-XX:ArchiveClassesAtExit={pending}",), pending, final)


@dataclass(frozen=True, slots=True)
class JavaProgram:
    """A main class on a classpath, run as a subprocess with ``java``."""

    classpath: str
    main_class: str
    jvm_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)

    def command(self, *args: str) -> list[str]:
        return ["java", *self.jvm_args, "-cp", self.classpath, self.main_class, *map(str, args)]

    def _env(self) -> dict[str, str]:
        return {**os.environ, **self.env}

    def run(
        self, *args: str | os.PathLike[str], timeout: float = RUN_TIMEOUT_S, check: bool = True, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        """Run to completion and capture stdout/stderr as bytes; with ``check`` a non-zero exit raises
        JavaToolError carrying the program's stderr."""
        require_tools("java")
        cmd = self.command(*map(str, args))
        try:
            done = subprocess.run(cmd, capture_output=True, timeout=timeout, check=False, env=self._env(), cwd=cwd)
        except subprocess.TimeoutExpired as err:
            raise JavaToolError(f"{self.main_class} timed out after {timeout}s") from err
        if check and done.returncode != 0:
            stderr = done.stderr.decode(errors="replace").strip()[-4000:]
            shown = " ".join(map(str, args))
            raise JavaToolError(f"{self.main_class} {shown} exited {done.returncode}:\n{stderr}")
        return done

    def start(
        self, *args: str | os.PathLike[str], cwd: Path | None = None, stdout=None, stderr=None
    ) -> subprocess.Popen[bytes]:
        """Start a long-running program (a broker, a namesrv); the caller owns the process and must stop it."""
        require_tools("java")
        return subprocess.Popen(self.command(*map(str, args)), env=self._env(), cwd=cwd, stdout=stdout, stderr=stderr)


def build_program(
    name: str,
    main_class: str,
    artifacts: Sequence[str],
    *,
    jvm_args: Sequence[str] = (),
    env: dict[str, str] | None = None,
) -> JavaProgram:
    """Resolve ``artifacts``, compile ``tests/java/<name>/`` against them and return the runnable program."""
    require_tools("java", "javac", "mvn")
    classpath = resolve_classpath(artifacts)
    classes = compile_java(name, classpath)
    return JavaProgram(f"{classes}{os.pathsep}{classpath}", main_class, tuple(jvm_args), dict(env or {}))
