"""Turning `Flow` data into OpenFlow 1.3 messages, and programming a switch by difference."""

from __future__ import annotations

from controller.routing import Flow


def flow_mod(dp, flow: Flow, delete: bool = False):
    """An OFPFlowMod adding (or strictly deleting) one rule."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    match = parser.OFPMatch(**dict(flow.match))
    if delete:
        return parser.OFPFlowMod(
            datapath=dp,
            cookie=flow.cookie,
            command=ofp.OFPFC_DELETE_STRICT,
            priority=flow.priority,
            match=match,
            out_port=ofp.OFPP_ANY,
            out_group=ofp.OFPG_ANY,
        )
    actions = [parser.OFPActionOutput(flow.out_port)]
    inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
    return parser.OFPFlowMod(datapath=dp, cookie=flow.cookie, priority=flow.priority, match=match, instructions=inst)


def clear(dp) -> None:
    """Delete every rule of table 0 (a switch that reconnects starts from a known state)."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    dp.send_msg(
        parser.OFPFlowMod(
            datapath=dp,
            command=ofp.OFPFC_DELETE,
            table_id=ofp.OFPTT_ALL,
            out_port=ofp.OFPP_ANY,
            out_group=ofp.OFPG_ANY,
            match=parser.OFPMatch(),
        )
    )


def program(dp, old: set[Flow], new: set[Flow]) -> int:
    """Delete rules no longer wanted, add the new ones (a changed output is re-added, which
    overwrites the same match), then a barrier. Returns the barrier's xid."""
    old_by_match = {(f.priority, f.match): f for f in old}
    new_by_match = {(f.priority, f.match): f for f in new}
    for key, f in old_by_match.items():
        if key not in new_by_match:
            dp.send_msg(flow_mod(dp, f, delete=True))
    for key, f in new_by_match.items():
        if old_by_match.get(key) != f:
            dp.send_msg(flow_mod(dp, f))
    barrier = dp.ofproto_parser.OFPBarrierRequest(dp)
    dp.set_xid(barrier)
    dp.send_msg(barrier)
    return barrier.xid
