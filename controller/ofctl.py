"""Turning `Flow` and `Group` data into OpenFlow 1.3 messages, and programming a switch by difference.

An ECMP `Group` is not an OpenFlow select group: OVS hashes those in the datapath (dp_hash and
recirculation), so its flow dump never shows which connection took which port. Instead a rule
that sends to group G loads G into reg1, hashes the packet's symmetric 5-tuple into reg0 with
Nicira's `multipath` action (bucket 0..n-1, the switch's own basis) and resubmits to
`ECMP_TABLE`, where one rule per bucket outputs to its port (`routing.bucket_flows`). The hash
is computed when OVS translates a flow, so the datapath flow carries the connection's TCP
ports and its output port (emulation.flows reads C from it).
"""

from __future__ import annotations

from os_ken.ofproto import nicira_ext

from controller.routing import ECMP_TABLE, Flow, Group, bucket_flows, ecmp_basis

#: reg0's bits that hold the bucket (up to 65536 buckets)
_BUCKET_BITS = nicira_ext.ofs_nbits(0, 15)


def ecmp_actions(dp, group: Group) -> list:
    """The actions of a rule that sends to `group`: group id -> reg1, hash -> reg0, resubmit."""
    parser = dp.ofproto_parser
    return [
        parser.OFPActionSetField(reg1=group.group_id),
        parser.NXActionMultipath(
            fields=nicira_ext.NX_HASH_FIELDS_SYMMETRIC_L4,
            basis=ecmp_basis(dp.id),
            algorithm=nicira_ext.NX_MP_ALG_HRW,
            max_link=len(group.ports) - 1,
            arg=0,
            ofs_nbits=_BUCKET_BITS,
            dst="reg0",
        ),
        parser.NXActionResubmitTable(table_id=ECMP_TABLE),
    ]


def flow_mod(dp, flow: Flow, delete: bool = False, groups: dict[int, Group] | None = None):
    """An OFPFlowMod adding (or strictly deleting) one rule; `groups` resolves an ECMP rule's group."""
    ofp, parser = dp.ofproto, dp.ofproto_parser
    match = parser.OFPMatch(**dict(flow.match))
    if delete:
        return parser.OFPFlowMod(
            datapath=dp,
            cookie=flow.cookie,
            table_id=flow.table,
            command=ofp.OFPFC_DELETE_STRICT,
            priority=flow.priority,
            match=match,
            out_port=ofp.OFPP_ANY,
            out_group=ofp.OFPG_ANY,
        )
    if flow.group is not None:
        group = (groups or {}).get(flow.group)
        if group is None:
            raise ValueError(f"rule {flow.match} sends to ECMP group {flow.group}, which the switch does not hold")
        actions = ecmp_actions(dp, group)
    else:
        actions = [parser.OFPActionOutput(flow.out_port)]
    inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
    return parser.OFPFlowMod(
        datapath=dp, cookie=flow.cookie, table_id=flow.table, priority=flow.priority, match=match, instructions=inst
    )


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


def _rules(items: set[Flow | Group]) -> dict[tuple, Flow]:
    """Every rule a switch holds, ECMP groups expanded into their bucket rules, by (table, priority, match)."""
    flows = [f for f in items if isinstance(f, Flow)]
    flows += [b for g in items if isinstance(g, Group) for b in bucket_flows(g)]
    return {(f.table, f.priority, f.match): f for f in flows}


def program(dp, old: set[Flow | Group], new: set[Flow | Group]) -> int:
    """Bring a switch from `old` to `new`: bucket rules added or changed first (routes may
    resubmit to them), then routes no longer wanted deleted and new or changed ones added (an
    ECMP route whose group changed is re-added: its hash range depends on the bucket count),
    then bucket rules no longer wanted deleted, then a barrier. Returns the barrier's xid."""
    old_groups = {g.group_id: g for g in old if isinstance(g, Group)}
    new_groups = {g.group_id: g for g in new if isinstance(g, Group)}
    old_rules, new_rules = _rules(old), _rules(new)

    def changed(key: tuple, f: Flow) -> bool:
        was = old_rules.get(key)
        return was != f or (f.group is not None and old_groups.get(f.group) != new_groups.get(f.group))

    for key, f in new_rules.items():
        if f.table == ECMP_TABLE and changed(key, f):
            dp.send_msg(flow_mod(dp, f))
    for key, f in old_rules.items():
        if f.table != ECMP_TABLE and key not in new_rules:
            dp.send_msg(flow_mod(dp, f, delete=True))
    for key, f in new_rules.items():
        if f.table != ECMP_TABLE and changed(key, f):
            dp.send_msg(flow_mod(dp, f, groups=new_groups))
    for key, f in old_rules.items():
        if f.table == ECMP_TABLE and key not in new_rules:
            dp.send_msg(flow_mod(dp, f, delete=True))
    barrier = dp.ofproto_parser.OFPBarrierRequest(dp)
    dp.set_xid(barrier)
    dp.send_msg(barrier)
    return barrier.xid
