"""State and the up-to-date rule: what is built, and whether it still is.

Per-step stamps and the run lock (state), doit's crash-safe DB (doitdb), the one rule that
says when a step is current (uptodate), which steps run right now (running), files
dated in the future (clockskew), the base a workdir was built on (basememo) and what
ccache and distcc saved per step (launchstats), the prefixes one workdir builds and who
filled a prefix (workdirs); the commands that show state read it through view. It may
read the sources room (a checkout's commit and edits are inputs of the rule), never the
engine or the cache.
"""
