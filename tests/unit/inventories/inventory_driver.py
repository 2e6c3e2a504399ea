"""Evaluate inventories/example/aws_ec2.yml with ansible-core's own machinery, in a process of its own.

Run by test_aws_ec2_inventory.py with ANSIBLE_COLLECTIONS_PATH pointing at a tree that holds this
collection, so the FQCN filter resolves as it does for users. Reads a JSON request on stdin and
prints a JSON answer:

- {"mode": "templar", "config": path, "hostvars": [...]}: each keyed_groups key, groups condition
  and compose expression of the config, evaluated with a Templar for each instance's host variables.
- {"mode": "aws_ec2", "config": path, "instances": [...]}: the real amazon.aws.aws_ec2 inventory
  plugin parses the config; only its EC2 query is replaced, by one that answers with the given
  instances (boto3's DescribeInstances shape) that match the filters the plugin sends.
"""

from __future__ import annotations

import json
import sys


def evaluate_with_templar(config_path, hostvars_list):
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    loader = DataLoader()
    config = loader.load_from_file(config_path, cache="none", trusted_as_template=True)
    templar = Templar(loader=loader)
    results = []
    for hostvars in hostvars_list:
        templar.available_variables = hostvars
        results.append({
            "keyed_groups": [
                {"key": templar.evaluate_expression(entry["key"]), "prefix": entry.get("prefix"), "separator": entry.get("separator")}
                for entry in config.get("keyed_groups", [])
            ],
            "groups": sorted(name for name, condition in config.get("groups", {}).items() if templar.evaluate_conditional(condition)),
            "compose": {name: templar.evaluate_expression(expression) for name, expression in config.get("compose", {}).items()},
        })
    return results


def _matches(instance, boto3_filters):
    """The EC2 API's filtering, for the filter names the config may use."""
    fields = {
        "architecture": lambda item: item.get("Architecture"),
        "instance-state-name": lambda item: item.get("State", {}).get("Name"),
        "instance-type": lambda item: item.get("InstanceType"),
    }
    for entry in boto3_filters:
        if entry["Name"] not in fields:
            raise AssertionError("test double does not know the EC2 filter %r" % entry["Name"])
        if fields[entry["Name"]](instance) not in entry["Values"]:
            return False
    return True


def evaluate_with_aws_ec2(config_path, instances):
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader

    try:
        from ansible_collections.amazon.aws.plugins.inventory import aws_ec2
    except ImportError as error:
        return {"skip": "amazon.aws missing: %s" % error}

    seen_filters = []

    def describe(self, regions, filters, strict_permissions):  # pylint: disable=unused-argument
        seen_filters.append(filters)
        return [dict(instance) for instance in instances if _matches(instance, filters)]

    aws_ec2.InventoryModule._get_instances_by_region = describe  # pylint: disable=protected-access
    inventory = InventoryManager(loader=DataLoader(), sources=[config_path])
    if not seen_filters:
        raise AssertionError("the aws_ec2 plugin did not parse %s" % config_path)
    groups = {name: sorted(host.name for host in group.get_hosts()) for name, group in inventory.groups.items()}
    hostvars = {host.name: {"ansible_host": host.vars.get("ansible_host")} for host in inventory.get_hosts()}
    return {"groups": groups, "hostvars": hostvars, "filters": seen_filters}


def main():
    from ansible.plugins.loader import init_plugin_loader

    request = json.load(sys.stdin)
    init_plugin_loader()
    if request["mode"] == "templar":
        answer = evaluate_with_templar(request["config"], request["hostvars"])
    else:
        answer = evaluate_with_aws_ec2(request["config"], request["instances"])
    json.dump(answer, sys.stdout, default=str)


if __name__ == "__main__":
    main()
