"""The only part of crawler_lib that imports pyspark/delta: session, schemas, Delta table I/O."""
