"""Experiments: sweeps of a lab and a measurement, run, stored, analysed and reported.

- :mod:`.runner`       runs an experiment's points (build, warm up, measure, tear down, resume)
- :mod:`.live`         the real lab, measurement and calibration the runner is given (its
                       tests give it fakes)
- :mod:`.store`        the SQLite results store (experiments, runs, metrics, environment, raw)
- host facts come from :mod:`sfclab.traffic.environment`, with :mod:`.provenance` (the
                       source tree's commit and the load of each invocation)
- :mod:`.stats`        mean, standard deviation, Student-t confidence intervals, series
- :mod:`.fit`          the power law t(n) = (1 - l)^(n - 2) t(2) and where it stops holding
- :mod:`.units`        units and words people read: a metric's quantity, the prefix that
                       fits it, and the words for metrics and parameters in every label
- :mod:`.plots`        PNG and SVG figures (matplotlib, headless)
- :mod:`.report`       report.md and a self-contained report.html
- :mod:`.compare`      results side by side: series, ratios with 95 % intervals, environment
                       differences, published bands; :mod:`.comparetext` prints it
- :mod:`.findings`     published findings as data, and their verdicts from a run's databases
- :mod:`.verdicts`     the verdict rule: Fieller's interval of a ratio against the claim
- :mod:`.page`         docs/reproduction.md filled from a run of scripts/reproduce.sh, with
                       :mod:`.pagetables` (its "ours" tables, one renderer per kind),
                       :mod:`.reprorun` (one invocation and its planned repetitions),
                       :mod:`.samplesize` (repetitions per finding from a pilot's variance),
                       :mod:`.reprobudget` (the time added repetitions may take, per finding),
                       :mod:`.bundle` (a run's evidence: databases, trials, checksums, run id)
                       and :mod:`.hostfacts` (CPU frequency, hypervisor, sysctls, packages)
- :mod:`.commands`     thin functions the CLI calls
- :mod:`.validate`     ``sfclab validate``: any sfclab file checked as its command checks it
"""

#: the results database when ``--db`` is not given (in the current directory)
DEFAULT_DB = "sfclab-results.db"
