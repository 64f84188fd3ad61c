"""Running a build: processes, state and stamps, sources, patches, the up-to-date rule, the step
actions, doit tasks, the engine, preflight, finish and status.
"""
