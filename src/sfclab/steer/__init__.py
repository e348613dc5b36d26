"""Chains on a running lab: classifier entries, inspection, traces (:mod:`.chains`)."""
