import pytest

from lab.describe.refs import ObjectRef, replica_name


@pytest.mark.parametrize(
    ("text", "kinded", "default", "kind", "namespace", "name", "replica", "owner", "namespaced"),
    [
        ("Deployment/web", True, "default", "Deployment", "default", "web", None, "", False),
        ("Pod/shop/web-2", True, "default", "Pod", "shop", "web-2", 2, "web", True),
        ("Service//dns", True, "default", "Service", "default", "dns", None, "", True),  # an empty NAMESPACE/
        ("web-0", False, "default", "", "default", "web-0", 0, "web", False),
        ("shop/web-10", False, "default", "", "shop", "web-10", 10, "web", True),
        ("web", False, "", "", "", "web", None, "", False),  # a bare name where any namespace's may be meant
        ("/web", False, "", "", "", "web", None, "", True),  # ... and one that asks for the namespace ""
        ("web-02", False, "default", "", "default", "web-02", None, "", False),  # replica_name writes no 0 first
        ("web-", False, "default", "", "default", "web-", None, "", False),
        ("web-x", False, "default", "", "default", "web-x", None, "", False),
    ],
)
def test_a_reference_is_parsed_into_its_parts(text, kinded, default, kind, namespace, name, replica, owner, namespaced):
    ref = ObjectRef.parse(text, kinded=kinded, default_namespace=default)
    assert (ref.kind, ref.namespace, ref.name, ref.replica, ref.owner, ref.namespaced) == (
        kind,
        namespace,
        name,
        replica,
        owner,
        namespaced,
    )


def test_a_replica_name_reads_back_as_its_owner_and_index():
    long_owner = "a" * 300
    for owner, index in (("web", 3), (long_owner, 12)):
        ref = ObjectRef.parse(replica_name(owner, index))
        assert ref.replica == index and owner.startswith(ref.owner)  # a long owner's name is cut
