"""The engine: one run from its first phase to its report.

The run's phases in one list (lifecycle), the doit task graph built from the step
table (tasks) and run in-process (engine), the one step runner (runner) with each
step kind's action (stepbind, actions, command, jobs, optcheck, cache_install: the
`cache:<component>` step), the run's data (build: BuildContext), preflight, finish
and verify, what a killed run left (leftovers), the failure messages of a machine
fault (stepfaults), the command that continues a run (continuation), and the status
model of `rocbuild status` (status). It may use every other room of run/.
"""
