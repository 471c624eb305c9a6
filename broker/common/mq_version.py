"""MQVersion.Version's names: what a client's version ordinal (its requests' ``version``) is called, as mqadmin
prints it and the broker's connection metrics label it."""

from __future__ import annotations

_V3_0_0 = ["SNAPSHOT", "ALPHA1", "BETA1", "BETA2", "BETA3", "BETA4", "BETA5", "BETA6_SNAPSHOT", "BETA6",
           "BETA7_SNAPSHOT", "BETA7", "BETA8_SNAPSHOT", "BETA8", "BETA9_SNAPSHOT", "BETA9", "FINAL"]


def _version_names() -> list[str]:
    """MQVersion.Version in ordinal order: 3.0.0's milestones, then SNAPSHOT and release of every patch (3.3 to 3.9
    start at patch 1), up to V5_9_9."""
    names = [f"V3_0_0_{suffix}" for suffix in _V3_0_0]
    releases = [(3, 0, range(1, 16))]
    for major in (3, 4, 5):
        for minor in range(1 if major == 3 else 0, 10):
            releases.append((major, minor, range(1 if major == 3 and minor >= 3 else 0, 10)))
    for major, minor, patches in releases:
        for patch in patches:
            names += [f"V{major}_{minor}_{patch}_SNAPSHOT", f"V{major}_{minor}_{patch}"]
    return names


VERSION_NAMES = tuple(_version_names())


def version_desc(ordinal: int) -> str:
    """MQVersion.getVersionDesc: an ordinal past the table is the last version.

    Examples:
        >>> version_desc(515), version_desc(413), version_desc(2**31 - 1)
        ('V5_5_1', 'V5_0_0', 'V5_9_9')
    """
    return VERSION_NAMES[min(max(ordinal, 0), len(VERSION_NAMES) - 1)]


