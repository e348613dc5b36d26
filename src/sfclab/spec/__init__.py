"""Lab and experiment files, validated.  Every error names the file, the place in the document
(``links[3].endpoints[1]``) and, where known, the line.

- :mod:`.reading`          the one bounded reader of every input file
- :mod:`.source`           YAML documents with positions: duplicate keys refused, lines found
- :mod:`.text`             no NUL anywhere in a document
- :mod:`.strict`           the base of every model: unknown keys refused, values frozen
- :mod:`.wording`          one wording for every bad value: ``PLACE: expected WHAT, got VALUE``
- :mod:`.limits`           every bound on the input, as named constants
- :mod:`.names`            the name rule for labs, nodes and interfaces
- :mod:`.quantities`       rates and sizes, one grammar for every layer
- :mod:`.addresses`        which IPv4 addresses a lab may use
- :mod:`.lab`              the lab file: a validated, immutable description
- :mod:`.kinds`            what validation needs of node kinds and link forms
- :mod:`.checks`           checks across the whole lab that no single field can make
- :mod:`.segments`         layer-2 segments: the pieces of a lab that share one subnet
- :mod:`.chain`            the ``chain:`` shorthand, expanded into nodes and links
- :mod:`.hosts`            hosts and tenants in the lab file
- :mod:`.image`            ``image:`` on a node: its container, checked as text and on the machine
- :mod:`.sfc`              service function chains and groups (``chains:``, ``groups:``)
- :mod:`.ports`            a port range as the data plane's prefix blocks
- :mod:`.chainfile`        a chain file handed to a running lab (``sfclab chain add``)
- :mod:`.classifier_file`  a file of classifiers (``sfclab chain classify --from-file``)
- :mod:`.filekind`         which kind of sfclab file a document is, from its top-level keys
- :mod:`.generator`        the native generator's senders and receivers, by name
- :mod:`.measurement`      the measurement request: one typed model per kind
- :mod:`.experiment`       the experiment file: one lab, one measurement, a sweep, repetitions
"""
