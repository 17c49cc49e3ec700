"""The Spark jobs (`juggler spark ...`): generate, replay and backfill through Kafka.

Nothing here is imported by the engine or the worker; pyspark is imported only inside
the functions that need a session, so `juggler --help` stays fast.
"""
