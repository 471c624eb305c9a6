"""Access control and trace: what ACL 2.0's check and message trace cost, on our broker and on Apache's, measured in
the same run.

For each target (ours, Apache RocketMQ 5.5.0) the Java client (``tests/java/bench/BenchClient.java``) runs the cases
of ``broker_throughput.py`` (sync sends of 128 B, batches of 16; ``--sizes 128 1024`` adds 1 KB) with their consume
passes, in four modes:

- **off**: ACL off, client plain: the baseline.
- **acl super**: ACL 2.0 on (authentication and authorization, Apache's local providers), the client signing as the
  SUPER user of ``initAuthenticationUser``: signature check, then the user's type ends authorization.
- **acl normal**: the same broker, the client signing as a NORMAL user whose ACL allows ``Topic:Bench*`` and
  ``Group:Bench*`` (Pub, Sub): every request also walks the policy entries.
- **trace**: ACL off, the broker with ``traceTopicEnable=true``, the client with message trace on (a Pub record per
  send and Sub records per consume, batched by the client and sent to RMQ_SYS_TRACE_TOPIC).

Each target starts twice (ACL off for off and trace, ACL on for the two signed modes), one broker at a time, each
with ``--broker-warmup`` seconds of untimed load first (every case, an equal share each). The tables give msg/s and
the broker's CPU us/msg per mode, the ratio to mode off of the same target (on/off), and ours against Apache's
(ours/apache).

The in-process part times what our broker adds per signed request, without sockets or the event loop: Java-shaped
frames (``request_cost.py``'s SEND_MESSAGE_V2, SEND_BATCH_MESSAGE and PULL_MESSAGE), signed by AclClientRPCHook's
rules, decoded as the broker decodes them, then the broker's check (``AuthPipeline``: signature and ACL evaluation)
as a super and as a normal user; the signature alone is timed too. CPU time of this thread per request.

Nothing here asserts on time. ``--profile DIR`` records our broker with py-spy, as ``broker_throughput.py`` does.

Examples
--------
    python bench/acl_trace_cost.py                      # every mode, 128 B, 10 s per case, ours and apache
    python bench/acl_trace_cost.py --quick              # smoke run: 1.5 s per case
    python bench/acl_trace_cost.py --in-process-only    # the per-request check alone, no brokers
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))  # run as a script from anywhere without installing the package

from bench.request_cost import GROUP, TOPIC, Peer, java_pull_frame, java_send_frame  # noqa: E402
from bench.throughput_runner import (  # noqa: E402
    REFERENCE,
    Case,
    JavaClient,
    Result,
    Running,
    Settings,
    add_case_arguments,
    best,
    case_line,
    case_settings,
    create_topic,
    java_case,
    machine,
    ratio,
    running_target,
    signed_tools_home,
    warm_up,
)
from broker.auth.config import parse_auth_config  # noqa: E402
from broker.auth.evaluate import AuthEvaluator  # noqa: E402
from broker.auth.metadata import AuthMetadataManager  # noqa: E402
from broker.auth.model import Acl, User  # noqa: E402
from broker.auth.store import AuthStore  # noqa: E402
from broker.remoting.command import RemotingCommand, encode  # noqa: E402
from broker.remoting.exchange import RemotingExchange  # noqa: E402
from broker.remoting.signing import SessionCredentials, sign_request, signature_matches  # noqa: E402
from broker.server.auth_pipeline import AuthPipeline  # noqa: E402
from tests.helpers import mqadmin  # noqa: E402
from tests.integration.auth_env import AUTH_CONF, SUPER  # noqa: E402

TARGETS = ("ours", "apache")
NORMAL = SessionCredentials("bench_user", "benchpw12")
NORMAL_RESOURCES = "Topic:Bench*,Group:Bench*"  # every case's topic and consumer group, and the warm-up's
CHECKS = 20_000  # in-process requests per shape and user


@dataclass(frozen=True, slots=True)
class Mode:
    name: str
    client: JavaClient
    acl: bool  # runs on the broker with ACL 2.0 on


MODES = (Mode("off", JavaClient(), acl=False), Mode("trace", JavaClient(trace=True), acl=False),
         Mode("acl super", JavaClient(SUPER), acl=True), Mode("acl normal", JavaClient(NORMAL), acl=True))
BASELINE = MODES[0].name
PLAIN_CONF = {"traceTopicEnable": "true"}


@dataclass(slots=True)
class Run:
    settings: Settings
    cases: list[Case]
    modes: list[Mode]
    results: dict[tuple[str, str, Case], list[Result]] = field(default_factory=dict)  # (target, mode, case)


# -- the brokers ------------------------------------------------------------------------------------------------------


def allow_normal_user(running: Running) -> None:
    """The NORMAL user and its ACL on the running broker, created with our ``mqadmin`` signing as the super user."""
    home = signed_tools_home(running)
    for args in (("createUser", "-b", running.broker_addr, "-u", NORMAL.access_key, "-p", NORMAL.secret_key),
                 ("createAcl", "-b", running.broker_addr, "-s", f"User:{NORMAL.access_key}", "-r", NORMAL_RESOURCES,
                  "-a", "Pub,Sub", "-d", "Allow")):
        done = mqadmin(*home, *args)
        if done.code != 0 or "success" not in done.out:
            raise RuntimeError(f"mqadmin {args[0]} exited {done.code}:\n{done.err}{done.out}")


def run_target(run: Run, target: str, round_no: int) -> None:
    for acl in (False, True):
        modes = [m for m in run.modes if m.acl == acl]
        if not modes:
            continue
        home = run.settings.work / f"{target}-{'acl' if acl else 'plain'}-{round_no}"
        conf = AUTH_CONF if acl else PLAIN_CONF
        with running_target(target, home, run.settings, conf, admin_credentials=SUPER if acl else None) as running:
            if acl:
                allow_normal_user(running)
            warm_up(run.settings, running, modes[0].client, run.cases)
            for mode in modes:
                for case in run.cases:
                    topic = f"Bench_{mode.name.replace(' ', '_')}_{case.slug}_{round_no}"
                    create_topic(run.settings, running, topic)
                    result = java_case(run.settings, running, case, topic, mode.client)
                    run.results.setdefault((target, mode.name, case), []).append(result)
                    print(case_line(target, f"{mode.name}: {case.label}", result), flush=True)
        shutil.rmtree(home, ignore_errors=True)  # GiB-sized CommitLog files


# -- the report -------------------------------------------------------------------------------------------------------


def report(run: Run, targets: list[str]) -> str:
    """Two markdown tables (send, consume): per case and mode, each target's msg/s and CPU us/msg, its ratio to mode
    off, and ours/apache."""
    sections = []
    compare = "ours" in targets and REFERENCE in targets
    for title, rate, cpu in (("send", "send_mps", "cpu_us_per_msg"),
                             ("consume", "consume_mps", "consume_cpu_us_per_msg")):
        head = ["case", "mode", *(f"{t} {title} msg/s" for t in targets), *(f"{t} on/off" for t in targets),
                *(["ours/apache"] if compare else []),
                *(f"{t} CPU us/msg" for t in targets)]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for case in run.cases:
            for mode in run.modes:
                got = {t: best(run.results[(t, mode.name, case)]) for t in targets
                       if (t, mode.name, case) in run.results}
                if len(got) != len(targets):
                    continue
                base = {t: run.results.get((t, BASELINE, case)) for t in targets}
                row = [f"java {case.size} B " + ("sync" if case.batch == 1 else f"batch {case.batch}"), mode.name,
                       *(f"{getattr(got[t], rate):,.0f}" for t in targets),
                       *(ratio(getattr(got[t], rate), getattr(best(base[t]), rate)) if base[t] else "-"
                         for t in targets),
                       *([ratio(getattr(got["ours"], rate), getattr(got[REFERENCE], rate))] if compare else []),
                       *(f"{getattr(got[t], cpu):.1f}" for t in targets)]
                lines.append("| " + " | ".join(row) + " |")
        sections.append("\n".join(lines))
    return "\n\n".join(sections)


# -- our broker's check in process ------------------------------------------------------------------------------------


def received(frame: bytes, credentials: SessionCredentials) -> RemotingCommand:
    """``frame``'s request signed with ``credentials`` and decoded again, as the broker receives it."""
    unsigned = next(iter(RemotingExchange(peer=Peer.remote_address).receive_data(frame))).request
    signed = encode(sign_request(unsigned, credentials))
    return next(iter(RemotingExchange(peer=Peer.remote_address).receive_data(signed))).request


def auth_pipeline(store_dir: Path) -> AuthPipeline:
    """ACL 2.0 as a broker with AUTH_CONF sets it up: the super user, and the normal user allowed the request
    shapes' topic and group (plus a few entries that do not match, as a real policy has)."""
    config = parse_auth_config(AUTH_CONF, "DefaultCluster")
    metadata = AuthMetadataManager(AuthStore(str(store_dir)))
    assert config.init_authentication_user is not None
    metadata.init_user(config.init_authentication_user.username, config.init_authentication_user.password)
    metadata.create_user(User(NORMAL.access_key, NORMAL.secret_key))
    entries = [{"resource": f"Topic:Other{i}", "actions": ["Pub"], "decision": "Allow"} for i in range(4)]
    entries += [{"resource": f"Topic:{TOPIC}", "actions": ["Pub", "Sub"], "decision": "Allow"},
                {"resource": f"Group:{GROUP}", "actions": ["Sub"], "decision": "Allow"}]
    metadata.create_acl(Acl.from_info({"policies": [{"entries": entries}]}, f"User:{NORMAL.access_key}"))
    return AuthPipeline(AuthEvaluator(config, metadata))


def time_per_call(call: Callable[[], object], count: int) -> float:
    """CPU microseconds of this thread per call (after a warm-up of a tenth)."""
    for _ in range(count // 10):
        call()
    begin = time.thread_time()
    for _ in range(count):
        call()
    return (time.thread_time() - begin) * 1e6 / count


def in_process(count: int) -> str:
    """us/request of the signature check alone and of the whole check, per request shape and user."""
    shapes = {"send 128 B": java_send_frame(128, 1, 0), "send 128 B batch 16": java_send_frame(128, 16, 0),
              "pull 32": java_pull_frame(0, 0)}
    lines = [f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}",
             "| request | body B | signature only us | check, super user us | check, normal user us |",
             "|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory(prefix="acl-cost-") as tmp:
        pipeline, peer = auth_pipeline(Path(tmp)), Peer()
        for label, frame in shapes.items():
            timings = []
            for credentials in (SUPER, NORMAL):
                request = received(frame, credentials)
                refused = pipeline(peer, request)  # type: ignore[arg-type]  # the check reads remote_address only
                if refused is not None:
                    raise RuntimeError(f"{label} as {credentials.access_key} refused: {refused.remark}")
                if credentials is SUPER:
                    timings.append(time_per_call(lambda r=request: signature_matches(r, SUPER.secret_key), count))
                timings.append(time_per_call(lambda r=request: pipeline(peer, r), count))  # type: ignore[arg-type]
            body = len(bytes(request.body or b""))
            lines.append(f"| {label} | {body:,} | " + " | ".join(f"{t:.1f}" for t in timings) + " |")
    return "\n".join(lines)


# -- the run ----------------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_case_arguments(parser)
    parser.add_argument("--targets", nargs="+", choices=TARGETS, default=list(TARGETS))
    parser.add_argument("--modes", nargs="+", choices=[m.name for m in MODES], default=[m.name for m in MODES])
    parser.add_argument("--repeat", type=int, default=1, help="rounds; the best send rate per case is kept")
    parser.add_argument("--checks", type=int, default=CHECKS, help="in-process requests per shape and user")
    parser.add_argument("--in-process-only", action="store_true", help="only our broker's check, in this process")
    parser.add_argument("--profile", type=Path, help="py-spy our broker during the cases, into this dir")
    parser.add_argument("--quick", action="store_true", help="smoke run: 1.5 s per case, 2,000 checks")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.warmup, args.consume_seconds, args.checks = 1.5, 0.5, 30.0, 2_000
        args.broker_warmup = min(args.broker_warmup, 2.0)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    print(f"machine: {machine()}")
    print(f"command: python bench/acl_trace_cost.py {' '.join(argv if argv is not None else sys.argv[1:])}\n")
    print(f"our broker's check per signed request, in process ({args.checks:,} requests per shape and user):")
    print(in_process(args.checks), "\n", flush=True)
    if args.in_process_only:
        return
    settings = case_settings(args, "acl-trace-cost", profile=args.profile)
    modes = [m for m in MODES if m.name in args.modes]
    run = Run(settings, [Case("java", size, batch) for size in args.sizes for batch in (1, args.batch)], modes)
    print(f"{args.threads} senders, {args.warmup:g} s warm-up + {args.seconds:g} s measured per case, modes "
          f"{', '.join(m.name for m in modes)}\n", flush=True)
    for round_no in range(args.repeat):
        for target in args.targets if round_no % 2 == 0 else list(reversed(args.targets)):
            run_target(run, target, round_no)
    print()
    print(report(run, args.targets))
    if args.work_dir is None:
        shutil.rmtree(settings.work, ignore_errors=True)


if __name__ == "__main__":
    main()
