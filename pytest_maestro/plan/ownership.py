"""File ownership over the dependency graph: conflicts between concurrent phases, chunks per wave.

Everything here works from a per-file index (path -> writers, readers; ``dag.file_index``), so two
phases are compared only when they touch one file. Phases are numbers 0..n-1 in written order, as
in ``PlanGraph`` and its ``Dag``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from .dag import FileIndex, Reach, conflict_groups
from .model import Phase
from .paths import claim_keys


@dataclass(frozen=True)
class Conflict:
    """Two phases that may run at the same time and touch ``path``; ``writer`` writes it.

    ``kind`` is ``"write"`` when ``other`` writes it too, ``"read"`` when ``other`` only reads it.
    """

    writer: str
    other: str
    path: str
    kind: Literal["write", "read"]


@dataclass(frozen=True)
class Chunk:
    """Phases of one wave merged because their files conflict: one agent works through them.

    ``files`` are written by the chunk's phases, ``reads`` only read. Chunks of one wave are
    disjoint: no file one chunk writes is written or read by another, so chunks may run in parallel
    while the phases inside one chunk run one after the other. Two chunks that only read one file
    stay apart: reading together is safe.
    """

    wave: int
    label: str
    phases: tuple[str, ...]
    files: tuple[str, ...]
    reads: tuple[str, ...]
    depends_on: tuple[str, ...]  # labels of earlier chunks holding a direct dependency


# What a phase claims: the keys of the files it writes, and of those it only reads, in order.
Claims = tuple[tuple[str, ...], tuple[str, ...]]


def phase_claims(phases: Sequence[Phase], aliases: Mapping[str, str]) -> list[Claims]:
    """Each phase's claims, its declared paths made keys (``paths.claim_keys``): two spellings
    of one file, or a folder and a file inside it, are one key."""
    keys = claim_keys(
        (path for phase in phases for path in (*phase.files.all(), *phase.reads)), aliases
    )
    claims = []
    for phase in phases:
        writes = tuple(dict.fromkeys(keys[path] for path in phase.files.all()))
        reads = tuple(dict.fromkeys(keys[path] for path in phase.reads))
        claims.append((writes, tuple(key for key in reads if key not in writes)))
    return claims


def file_conflicts(
    path: str, index: FileIndex, reach: Reach, ids: Sequence[str]
) -> Iterator[Conflict]:
    """Each concurrent writer/writer and writer/reader pair of ``path``, once."""
    writers, readers = index[path]
    if not writers or len(writers) + len(readers) < 2:
        return
    writer_mask, reader_mask = reach.mask(writers), reach.mask(readers)
    for node in writers:
        for other in reach.concurrent_before(node, writer_mask):
            first, second = sorted((other, node))
            yield Conflict(ids[first], ids[second], path, "write")
        for other in reach.concurrent_before(node, reader_mask):
            yield Conflict(ids[node], ids[other], path, "read")
    for node in readers:
        for other in reach.concurrent_before(node, writer_mask):
            yield Conflict(ids[other], ids[node], path, "read")


def count_file_conflicts(path: str, index: FileIndex, reach: Reach) -> int:
    """How many conflicts ``file_conflicts`` yields for ``path``, without building them."""
    writers, readers = index[path]
    if not writers or len(writers) + len(readers) < 2:
        return 0
    writer_mask, reader_mask = reach.mask(writers), reach.mask(readers)
    count = sum(
        reach.concurrent_mask(node, writer_mask).bit_count()
        + reach.concurrent_mask(node, reader_mask).bit_count()
        for node in writers
    )
    return count + sum(reach.concurrent_mask(node, writer_mask).bit_count() for node in readers)


def build_chunks(
    phases: Sequence[Phase],
    deps: Sequence[Sequence[int]],
    wave_members: Sequence[Sequence[int]],
    roots: Sequence[int],
) -> list[list[Chunk]]:
    """Chunks per wave, in order of their first phase; labels A, B, ... across all waves."""
    label_of: dict[int, str] = {}
    result: list[list[Chunk]] = []
    for wave, nodes in enumerate(wave_members, start=1):
        chunks = []
        for group in conflict_groups(nodes, roots):
            label = label_of[roots[group[0]]] = chunk_label(len(label_of))
            # dependencies sit in earlier waves, whose chunks already have labels
            depends = {label_of[roots[dep]] for node in group for dep in deps[node]}
            chunks.append(_chunk(wave, label, [phases[i] for i in group], depends))
        result.append(chunks)
    return result


def _chunk(wave: int, label: str, phases: list[Phase], depends: set[str]) -> Chunk:
    writes = {path for p in phases for path in p.files.all()}
    reads = {path for p in phases for path in p.reads}
    reads.difference_update(writes)
    return Chunk(
        wave=wave,
        label=label,
        phases=tuple(p.id for p in phases),
        files=tuple(sorted(writes)),
        reads=tuple(sorted(reads)),
        depends_on=tuple(sorted(depends, key=lambda name: (len(name), name))),
    )


def chunk_label(number: int) -> str:
    """0 -> A, 25 -> Z, 26 -> AA: spreadsheet column names."""
    label = ""
    number += 1
    while number:
        number, rest = divmod(number - 1, 26)
        label = chr(ord("A") + rest) + label
    return label


def wave_overlap(chunks: Sequence[Chunk]) -> frozenset[str]:
    """Files one chunk of a wave writes that another chunk of it writes or reads.

    Empty for the chunks ``PlanGraph`` builds: this is the non-intersection proof, checked in one
    pass over the files rather than by comparing chunks pairwise.
    """
    touched: dict[str, set[int]] = {}
    for number, chunk in enumerate(chunks):
        for path in (*chunk.files, *chunk.reads):
            touched.setdefault(path, set()).add(number)
    written = {path for chunk in chunks for path in chunk.files}
    return frozenset(path for path in written if len(touched[path]) > 1)
