"""The config file's vocabulary: the base every table's model extends (strict, no unknown
keys), the markers a field may carry (its environment variable), and the one-line wording
of what is wrong with a file (problems.py).

Each table's model lives beside the code that owns the table (telemetry/metrics.py has
`[metrics]`, lake/settings.py `[lake]`, …) and cli/config_schema.py composes them into the
schema of the whole file. Not responsible for reading files, the environment or flags
(cli/settings.py), nor for what any setting means.
"""
