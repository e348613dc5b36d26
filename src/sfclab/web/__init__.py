"""``sfclab serve``: an HTTP API and a web view over the library, in one foreground process.

Objects and how they relate:

- :mod:`.app` makes the FastAPI application: the routes of :mod:`.routes` (labs, chains,
  measurements, results, live counters, the page), the error mapping of :mod:`.errors`
  (``SpecError`` -> 422 with the place in the document, a clash -> 409, an unknown lab -> 404,
  a body of another media type -> 415, anything else -> 500), and :mod:`.guard` around it all:
  the Host, Origin, Referer and Sec-Fetch-Site checks (403), the token of :mod:`.auth` (401;
  the page's cookie), bounded bodies (413) and the safety headers.
- :mod:`.tokenfile` reads the token file (the server's user's, mode 0600, at most 4 KiB) or
  makes ``serve.token`` in the state directory once; :mod:`.contract` is what the OpenAPI
  document declares: every status each route answers, the token, the request bodies' schemas.
- Every route calls the library (``realize.lifecycle``, ``realize.inspect``, ``live.ops.chains``,
  ``traffic.measure`` with the typed request of ``spec.measurement``, ``experiments.store``),
  never the command line.
- :class:`.jobs.Jobs` (:mod:`.jobs`) runs measurements in the background, one worker process each
  (:mod:`.worker`), so stopping the server interrupts them the way Ctrl-C interrupts
  ``sfclab traffic``: generators end, steering is restored, the lab is left as it was; each
  job keeps the page's row of every trial (:mod:`.progress`: offered, received, loss, where the
  packets were lost, the interval an NDR/PDR search narrowed to).
- :class:`.counters.Counters` (:mod:`.counters`) reads the interface counters of a lab's namespaces
over netlink
  sockets it keeps open, for the page's per-interface packet and drop rates.
- :mod:`.topology` turns a lab's plan into the graph the page draws (nodes grouped by host and
  tenant when the plan has them, links with their kind, chains as paths); :mod:`.export` writes
  that view as one self-contained HTML file (``sfclab graph LAB --format html``).
- :mod:`.results` shapes a results database for the page's plots (series with confidence
  intervals, power-law fits, offered-vs-received curves) and the report's tables.
- :mod:`.services` holds what the routes share (the jobs, the counter readers, the default
  results database), one per application; :mod:`.vendor` finds the page's JavaScript
  libraries (npm packages in ``node_modules/``).
- :mod:`.server` listens (loopback by default; elsewhere only with ``--token-file``; a token
  always) until Ctrl-C or SIGTERM, and leaves every lab as it found it.
"""

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8470
