"""A root qdisc's own drop counter locates what the tracepoint did not see there."""

from sfclab.traffic.loss import LossReport, _add_untraced


def test_a_qdisc_counting_more_than_was_traced_locates_the_difference_on_its_node():
    rep = LossReport(loss_by_node={"sh": 90, "r": 5}, loss_by_reason={"QDISC_DROP": 95},
                     interfaces={"sh": {"eth1": {"QDISC_DROP": 90, "qdisc_tbf_drops": 100}},
                                 "r": {"eth0": {"QDISC_DROP": 5, "qdisc_fq_codel_drops": 5}}})
    _add_untraced(rep)
    assert rep.loss_by_node == {"sh": 100, "r": 5}
    assert rep.loss_by_reason == {"QDISC_DROP": 105}
    assert rep.qdisc_untraced == {"sh": 10}
    d = rep.to_dict(lost=105)
    assert d["unaccounted"] == 0 and d["qdisc_untraced"] == {"sh": 10} and d["located"] == 105


def test_traced_drops_without_a_qdisc_counter_are_left_as_they_are():
    rep = LossReport(loss_by_node={"sh": 7}, loss_by_reason={"QDISC_DROP": 7},
                     interfaces={"sh": {"eth1": {"QDISC_DROP": 7}, "eth0": {"rx_dropped": 3}}})
    _add_untraced(rep)
    assert rep.loss_by_node == {"sh": 7} and rep.qdisc_untraced == {}
    assert rep.to_dict(lost=10)["unaccounted"] == 3
