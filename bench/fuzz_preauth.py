"""A fuzz campaign over everything the broker decodes before authentication, in one process.

Inputs (``bench/fuzz_corpus.py``: valid frames of every request code, mutated layer by layer) go through the
broker's pre-processor path (``bench/fuzz_target.py``: frames, both header encodings, ext fields, header classes,
signing, the ACL 1.0 and 2.0 checks, the binary body decoders in C and Python). Only errors of rmq's error tree may
come out; anything else, a C decoder disagreeing with its Python twin, or an input taking longer than
``--hang-seconds`` is a finding, printed with the (seed, index) that rebuilds it.

Two engines:
- ``generate`` (the default): inputs as a pure function of (seed, index), any number, reproducible one by one.
- ``atheris``: coverage-guided (libFuzzer through atheris, ``pip install atheris==2.3.0``), the same mutations as its
  custom mutator, the seed frames as its corpus; it stops at its first finding and writes the input to a file.

Examples
--------
    python bench/fuzz_preauth.py --inputs 1000000 --seed 1     # the campaign of BENCHMARKS.md
    python bench/fuzz_preauth.py --replay 1:123456             # one input again, with its traceback
    python bench/fuzz_preauth.py --engine atheris --inputs 200000
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))  # run as a script from anywhere without installing the package

# The broker's modules are imported by the engine that runs (atheris has to instrument them as they are imported).

PROGRESS_EVERY = 100_000


class Hang(Exception):
    """An input ran longer than the watchdog allows."""


def _alarm(*_: object) -> None:
    raise Hang


class Campaign:
    """Counts what a run of the generator engine did: inputs, distinct ones, outcomes, findings, the slowest input."""

    def __init__(self, seed: int, hang_seconds: float) -> None:
        from bench.fuzz_corpus import Generator
        from bench.fuzz_target import Finding, PreAuthTarget

        self.finding = Finding
        self.generator = Generator(seed)
        self.target = PreAuthTarget()
        self.hang_seconds = hang_seconds
        self.totals: collections.Counter[str] = collections.Counter()
        self.findings: dict[str, tuple[int, str]] = {}
        self.finding_counts: collections.Counter[str] = collections.Counter()
        self.digests: set[bytes] = set()
        self.slowest = (0.0, -1)

    def run_one(self, index: int) -> None:
        data = self.generator.generate(index)
        self.digests.add(hashlib.blake2b(data, digest_size=8).digest())
        started = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, self.hang_seconds)
        try:
            outcome = self.target.run(data)
        except self.finding as finding:
            self._found(finding.key, index, str(finding))
            return
        except Hang:
            self._found("hang", index, f"no result within {self.hang_seconds} s")
            return
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            elapsed = time.perf_counter() - started
            if elapsed > self.slowest[0]:
                self.slowest = (elapsed, index)
        self.totals.update(frames=outcome.frames, commands=outcome.commands, refused=outcome.refused,
                           tree_errors=outcome.tree_errors)

    def _found(self, key: str, index: int, text: str) -> None:
        self.finding_counts[key] += 1
        self.findings.setdefault(key, (index, text))

    def run(self, inputs: int) -> float:
        signal.signal(signal.SIGALRM, _alarm)
        started = time.perf_counter()
        for index in range(inputs):
            self.run_one(index)
            if (index + 1) % PROGRESS_EVERY == 0:
                elapsed = time.perf_counter() - started
                print(f"{index + 1:>9,} inputs  {elapsed:7.1f} s  {(index + 1) / elapsed:6.0f} execs/s  "
                      f"findings {sum(self.finding_counts.values())}", flush=True)
        return time.perf_counter() - started

    def report(self, inputs: int, elapsed: float) -> None:
        seed = self.generator.seed
        print(f"\n{inputs:,} inputs (seed {seed}), {len(self.digests):,} distinct, {elapsed:.0f} s, "
              f"{inputs / elapsed:.0f} execs/s (generation included)")
        print(f"frames cut {self.totals['frames']:,}, commands decoded {self.totals['commands']:,}, refused by the "
              f"ACL checks {self.totals['refused']:,}, errors of the tree {self.totals['tree_errors']:,}")
        print(f"slowest input {self.slowest[0] * 1000:.1f} ms (index {self.slowest[1]})")
        print(f"findings: {len(self.findings)} distinct, {sum(self.finding_counts.values())} inputs")
        for key, count in self.finding_counts.most_common():
            index, text = self.findings[key]
            print(f"  {count:>6} x {text}  (replay: --replay {seed}:{index})")


def replay(spec: str) -> int:
    """Run one input of the generator again, with its full traceback."""
    from bench.fuzz_corpus import Generator
    from bench.fuzz_target import PreAuthTarget

    seed, index = (int(part) for part in spec.split(":"))
    data = Generator(seed).generate(index)
    print(f"input {seed}:{index}, {len(data)} bytes: {data[:400].hex()}{'...' if len(data) > 400 else ''}")
    outcome = PreAuthTarget().run(data)
    print(outcome)
    return 0


def run_atheris(inputs: int, seed: int) -> int:
    """libFuzzer's coverage-guided loop through atheris, our mutations as its custom mutator."""
    import atheris

    with atheris.instrument_imports(include=["broker"]):
        from bench.fuzz_corpus import mutate, seed_frames
        from bench.fuzz_target import PreAuthTarget
    seeds = seed_frames()
    target = PreAuthTarget()

    def test_one_input(data: bytes) -> None:
        target.run(data)

    def custom_mutator(data: bytes, max_size: int, mutation_seed: int) -> bytes:
        return mutate(data or seeds[0], random.Random(mutation_seed), seeds)[:max_size]

    corpus = Path(tempfile.mkdtemp(prefix="rmq-fuzz-corpus-"))
    for i, frame in enumerate(seeds):
        (corpus / f"seed-{i:04}").write_bytes(frame)
    argv = [sys.argv[0], f"-runs={inputs}", f"-seed={seed}", "-max_len=65536", "-print_final_stats=1",
            f"-artifact_prefix={corpus}/", str(corpus)]
    atheris.Setup(argv, test_one_input, custom_mutator=custom_mutator)
    atheris.Fuzz()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--engine", choices=("generate", "atheris"), default="generate")
    parser.add_argument("--hang-seconds", type=float, default=5.0, help="an input running longer is a finding")
    parser.add_argument("--replay", metavar="SEED:INDEX", help="run one generated input again and show it")
    args = parser.parse_args(argv)
    if args.replay:
        return replay(args.replay)
    if args.engine == "atheris":
        return run_atheris(args.inputs, args.seed)
    campaign = Campaign(args.seed, args.hang_seconds)
    elapsed = campaign.run(args.inputs)
    campaign.report(args.inputs, elapsed)
    campaign.target.close()
    return 1 if campaign.findings else 0


if __name__ == "__main__":
    sys.exit(main())
