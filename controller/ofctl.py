"""Turning `Flow` and `Group` data into OpenFlow 1.3 messages, and programming a switch by difference."""

from __future__ import annotations

from controller.routing import Flow, Group


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
    if flow.group is not None:
        actions = [parser.OFPActionGroup(flow.group)]
    else:
        actions = [parser.OFPActionOutput(flow.out_port)]
    inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
    return parser.OFPFlowMod(datapath=dp, cookie=flow.cookie, priority=flow.priority, match=match, instructions=inst)


def group_mod(dp, group: Group, command: str):
    """An OFPGroupMod: `add`, `modify` or `delete` a select group, one equal bucket per port.
    With no selection method, Open vSwitch 3.1 picks the bucket by `dp_hash` over the symmetric
    L3/L4 fields (addresses, protocol, TCP ports): per connection, as an ECMP switch."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    cmd = {"add": ofp.OFPGC_ADD, "modify": ofp.OFPGC_MODIFY, "delete": ofp.OFPGC_DELETE}[command]
    buckets = [
        parser.OFPBucket(
            weight=1, watch_port=ofp.OFPP_ANY, watch_group=ofp.OFPG_ANY, actions=[parser.OFPActionOutput(p)]
        )
        for p in (group.ports if command != "delete" else ())
    ]
    return parser.OFPGroupMod(dp, cmd, ofp.OFPGT_SELECT, group.group_id, buckets)


def clear(dp) -> None:
    """Delete every rule of every table and every group (a switch that reconnects starts from a
    known state)."""
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
    dp.send_msg(parser.OFPGroupMod(dp, ofp.OFPGC_DELETE, ofp.OFPGT_ALL, ofp.OFPG_ALL, []))


def program(dp, old: set[Flow | Group], new: set[Flow | Group]) -> int:
    """Bring a switch from `old` to `new`: groups added or changed first (rules may point at them),
    then rules no longer wanted deleted and new ones added (a changed action is re-added, which
    overwrites the same match), then groups no longer wanted deleted (deleting a group deletes
    the rules that still use it), then a barrier. Returns the barrier's xid."""
    old_groups = {g.group_id: g for g in old if isinstance(g, Group)}
    new_groups = {g.group_id: g for g in new if isinstance(g, Group)}
    for gid, g in new_groups.items():
        if gid not in old_groups:
            dp.send_msg(group_mod(dp, g, "add"))
        elif old_groups[gid] != g:
            dp.send_msg(group_mod(dp, g, "modify"))
    old_by_match = {(f.priority, f.match): f for f in old if isinstance(f, Flow)}
    new_by_match = {(f.priority, f.match): f for f in new if isinstance(f, Flow)}
    for key, f in old_by_match.items():
        if key not in new_by_match:
            dp.send_msg(flow_mod(dp, f, delete=True))
    for key, f in new_by_match.items():
        if old_by_match.get(key) != f:
            dp.send_msg(flow_mod(dp, f))
    for gid, g in old_groups.items():
        if gid not in new_groups:
            dp.send_msg(group_mod(dp, g, "delete"))
    barrier = dp.ofproto_parser.OFPBarrierRequest(dp)
    dp.set_xid(barrier)
    dp.send_msg(barrier)
    return barrier.xid
