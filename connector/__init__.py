"""Spark Structured Streaming connector (format "rmq"); see the README."""
