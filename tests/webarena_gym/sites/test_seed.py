"""The seeded world: deterministic, cached, and rich enough to ask questions about."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from webarena_gym.sites.db import check_password, connect, dump_digest
from webarena_gym.sites.seed import build_pristine, cache_key, pristine_paths


def _digests(paths: dict[str, Path]) -> dict[str, str]:
    return {name: dump_digest(path) for name, path in paths.items()}


def test_same_seed_gives_the_same_databases(tmp_path: Path) -> None:
    first = _digests(build_pristine(tmp_path / "a", seed=0))
    second = _digests(build_pristine(tmp_path / "b", seed=0))
    other = _digests(build_pristine(tmp_path / "c", seed=1))
    assert first == second
    assert first["magento"] != other["magento"] and first["postmill"] != other["postmill"]


def test_pristine_databases_are_cached(tmp_path: Path) -> None:
    paths = pristine_paths(0, tmp_path)
    stamps = {name: path.stat().st_mtime_ns for name, path in paths.items()}
    again = pristine_paths(0, tmp_path)
    assert again == paths
    assert {name: path.stat().st_mtime_ns for name, path in again.items()} == stamps
    assert paths["magento"].parent.name == cache_key(0)
    assert cache_key(0) != cache_key(1)


def test_shop_data_is_rich_and_consistent(sites_cache: Path) -> None:
    conn = connect(pristine_paths(0, sites_cache)["magento"], readonly=True)
    count = lambda sql: conn.execute(sql).fetchone()[0]  # noqa: E731
    assert count("SELECT COUNT(*) FROM category WHERE parent_id IS NULL") == 8
    assert 250 <= count("SELECT COUNT(*) FROM product") <= 450
    assert count("SELECT COUNT(DISTINCT sku) FROM product") == count("SELECT COUNT(*) FROM product")
    assert count("SELECT COUNT(*) FROM review") >= 500
    assert 400 <= count("SELECT COUNT(*) FROM sales_order") <= 700
    assert count("SELECT MIN(created_at) FROM sales_order") >= "2022-01-01"
    assert count("SELECT MAX(created_at) FROM sales_order") < "2024-01-01"
    statuses = {row[0] for row in conn.execute("SELECT DISTINCT status FROM sales_order")}
    assert statuses == {"pending", "processing", "complete", "canceled", "holded"}
    # Totals add up and every order's increment id is its id, zero-padded (Magento's shape).
    bad = count(
        "SELECT COUNT(*) FROM sales_order o WHERE subtotal_cents != (SELECT SUM(row_total_cents)"
        " FROM sales_order_item i WHERE i.order_id = o.id) OR grand_total_cents != subtotal_cents"
        " + shipping_cents OR CAST(increment_id AS INTEGER) != id"
    )
    assert bad == 0
    emma = conn.execute("SELECT * FROM customer WHERE email = 'emma.lopez@gmail.com'").fetchone()
    assert check_password("Password.123", emma["password_hash"])
    assert count(f"SELECT COUNT(*) FROM sales_order WHERE customer_id = {emma['id']}") >= 10
    admin = conn.execute("SELECT * FROM admin_user WHERE username = 'admin'").fetchone()
    assert check_password("admin1234", admin["password_hash"]) and not check_password(
        "x", admin["password_hash"]
    )
    assert count("SELECT COUNT(*) FROM customer") >= 10
    assert count("SELECT COUNT(*) FROM session") == 0


def test_forum_data_is_rich(sites_cache: Path) -> None:
    conn = connect(pristine_paths(0, sites_cache)["postmill"], readonly=True)
    count = lambda sql: conn.execute(sql).fetchone()[0]  # noqa: E731
    assert count("SELECT COUNT(*) FROM forum") >= 10
    assert count("SELECT COUNT(*) FROM submission") >= 300
    assert count("SELECT COUNT(*) FROM comment") >= 800
    assert count("SELECT COUNT(*) FROM comment WHERE parent_id IS NOT NULL") >= 100
    assert count("SELECT COUNT(*) FROM submission_vote") >= 1000
    user = conn.execute("SELECT * FROM users WHERE username = 'MarvelsGrantMan136'").fetchone()
    assert check_password("test1234", user["password_hash"])
    # Replies stay inside their post.
    assert (
        count(
            "SELECT COUNT(*) FROM comment c JOIN comment p ON p.id = c.parent_id"
            " WHERE p.submission_id != c.submission_id"
        )
        == 0
    )


def test_bestseller_questions_mostly_have_unique_answers(sites_cache: Path) -> None:
    from webarena_gym.sites.data import SiteData

    with SiteData(0, cache_dir=sites_cache) as data:
        for period, minimum in (("year", 2), ("month", 16)):
            rows = data.bestsellers(period, limit_per_period=2)
            by_period: dict[str, list[int]] = {}
            for row in rows:
                by_period.setdefault(row["period"], []).append(row["qty"])
            unique = [p for p, qtys in by_period.items() if len(qtys) == 1 or qtys[0] > qtys[1]]
            assert len(unique) >= minimum, (period, by_period)
        assert Counter(r["period"][:4] for r in data.bestsellers("month", limit_per_period=1)) == {
            "2022": 12,
            "2023": 12,
        }
