"""The library entry points of operations on a running lab, each taking its request
(:mod:`sfclab.live.request`) or a lab's name.  Each decides what does not depend on where the
hosts are -- placement, wiring, labels, the merged plan, saved before anything is made -- and
then asks the lab's runtime (:func:`sfclab.live.runtime.table.live_for`).

- :mod:`.add`: ``chain add`` and ``chain rm`` (``add_chain``, ``remove_chain``);
- :mod:`.migrate`: ``chain migrate`` (plan the clone, apply, switch, apply the removal);
- :mod:`.hostops`: ``host add``/``rm``/``ls``;
- :mod:`.chains`: ``chain ls``/``inspect``/``trace``; :mod:`.classify`: ``chain classify``;
- :mod:`.health`: ``chain watch`` and the health ``chain inspect`` shows.
"""
