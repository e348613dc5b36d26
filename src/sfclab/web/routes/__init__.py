"""The API's routes, one module per resource: :mod:`.labs`, :mod:`.hosts`, :mod:`.chains`,
:mod:`.measurements`, :mod:`.results`, and :mod:`.page` (the web view and its libraries).
"""
