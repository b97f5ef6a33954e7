"""PerTarget: one object per routed target, shared by the Kafka topics that route to it, made once."""

from connectors.config.routing import PerTarget, route


def test_topics_routed_to_one_target_share_one_object_made_once():
    made: list[str] = []

    def make(target: str) -> object:
        made.append(target)
        return object()

    per_target = PerTarget(lambda topic: route("out-${topic}", topic.split(".")[0]), make)
    orders, orders_again, clicks = per_target("orders.eu"), per_target("orders.us"), per_target("clicks.eu")
    assert orders is orders_again is per_target("orders.eu")
    assert clicks is not orders
    assert made == ["out-orders", "out-clicks"]
    assert per_target.by_target == {"out-orders": orders, "out-clicks": clicks}
