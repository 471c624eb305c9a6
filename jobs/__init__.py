"""Jobs: the main demo command and, later, Delta Lake backfill, ingest and replay."""
