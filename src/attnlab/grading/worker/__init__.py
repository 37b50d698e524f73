"""Where student code runs and how the grader reaches it: the narrow interface (`api`), its client to a worker
process (`remote`), the frames between them (`wire`), the worker process itself (`process`) and the operations
it runs (`executor`); `sandbox/` isolates and bounds each worker.
"""
