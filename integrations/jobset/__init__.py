"""JobSet and LeaderWorkerSet as Volcano gangs."""
