// Test helper: what a test's servers need from the egress rule (src/net/egress-rule.ts). They all
// listen on loopback over plain http, which the rule refuses unless the operator allows it.
import { EgressRule } from '../../src/net/egress-rule.js';

/** EGRESS_ALLOW for a test broker whose upstreams, authorization servers and receivers are on this machine. */
export const LOOPBACK_EGRESS_ALLOW = '127.0.0.0/8,::1';

/** The rule that EGRESS_ALLOW makes. */
export const LOOPBACK_EGRESS = new EgressRule({
  hosts: [],
  cidrs: [
    { network: '127.0.0.0', prefix: 8, family: 'ipv4' },
    { network: '::1', prefix: 128, family: 'ipv6' },
  ],
});
