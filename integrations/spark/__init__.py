"""Spark: the Spark operator's SparkApplication and native spark-submit pods as Volcano gangs."""
