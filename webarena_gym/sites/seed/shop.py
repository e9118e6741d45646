"""Seeded data of the shop (``magento`` database): catalogue, customers, reviews, two years of orders.

Everything is drawn from one :class:`random.Random`, in a fixed order, so a seed fixes the whole database."""

from __future__ import annotations

import random
import sqlite3
from datetime import datetime, timedelta
from typing import Any

from webarena_gym.sites.db import CLOCK_START, hash_password
from webarena_gym.sites.seed.text import HISTORY_END, fmt, load_vocab, random_time, salt, slugify

CUSTOMER_PASSWORD = "Password.123"
"""Password of every seeded customer (WebArena's customer account uses this one)."""
ADMIN_USERNAME = "admin"
ADMIN_PASSWORD = "admin1234"
N_EXTRA_CUSTOMERS = 14
N_ORDERS = 520
FLAT_RATE_CENTS = 500
"""Magento's default flat-rate shipping: $5 per item."""
_SKU_CHARS = "0123456789ABCDEFGHJKLMNPQRSTUVWXYZ"


def seed_magento(conn: sqlite3.Connection, rng: random.Random) -> None:
    """Fill an empty ``magento`` database (schema already created)."""
    vocab = load_vocab("shop")
    products = _seed_catalogue(conn, rng, vocab)
    customers = _seed_customers(conn, rng, vocab)
    _seed_reviews(conn, rng, vocab, products, customers)
    _seed_orders(conn, rng, products, customers)
    conn.execute(
        "INSERT INTO admin_user (username, firstname, lastname, email, password_hash) VALUES (?, ?, ?, ?, ?)",
        (ADMIN_USERNAME, "Admin", "User", "admin@example.com", hash_password(ADMIN_PASSWORD, salt(rng))),
    )
    conn.execute("INSERT INTO site_clock (id, now) VALUES (1, ?)", (CLOCK_START,))


def _seed_catalogue(
    conn: sqlite3.Connection, rng: random.Random, vocab: dict[str, Any]
) -> list[dict[str, Any]]:
    products: list[dict[str, Any]] = []
    names: set[str] = set()
    skus: set[str] = set()
    for top_pos, top in enumerate(vocab["categories"]):
        top_id = conn.execute(
            "INSERT INTO category (parent_id, name, url_path, position) VALUES (NULL, ?, ?, ?)",
            (top["name"], top["slug"], top_pos),
        ).lastrowid
        lo, hi = top["price"]
        for sub_pos, sub in enumerate(top["subcategories"]):
            sub_id = conn.execute(
                "INSERT INTO category (parent_id, name, url_path, position) VALUES (?, ?, ?, ?)",
                (top_id, sub["name"], f"{top['slug']}/{sub['slug']}", sub_pos),
            ).lastrowid
            for _ in range(rng.randint(9, 13)):
                for _attempt in range(20):
                    brand, noun = rng.choice(top["brands"]), rng.choice(sub["nouns"])
                    name = f"{brand} {noun}, {rng.choice(sub['variants'])}"
                    if name not in names:
                        break
                else:
                    continue
                names.add(name)
                sku = "B0" + "".join(rng.choice(_SKU_CHARS) for _ in range(8))
                while sku in skus:
                    sku = "B0" + "".join(rng.choice(_SKU_CHARS) for _ in range(8))
                skus.add(sku)
                dollars = lo + (hi - lo) * rng.random() ** 2
                price = int(dollars) * 100 + rng.choice((99, 99, 95, 49, 0))
                qty = 0 if rng.random() < 0.05 else rng.randint(1, 250)
                status = 2 if rng.random() < 0.03 else 1
                feats = rng.sample(top["features"], 2)
                noun = name.split(", ")[0]
                description = (
                    f"The {noun} is built for {rng.choice(top['uses'])}. It comes with {feats[0]} and "
                    f"{feats[1]}. Colour/size: {name.split(', ')[-1]}."
                )
                created = fmt(datetime(2021, 1, 1) + timedelta(seconds=rng.randrange(365 * 86400)))
                pid = conn.execute(
                    "INSERT INTO product (sku, name, url_key, category_id, price_cents, qty, status, "
                    "description,"
                    " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (sku, name, slugify(name), sub_id, price, qty, status, description, created),
                ).lastrowid
                products.append(
                    {
                        "id": pid,
                        "sku": sku,
                        "name": name,
                        "price": price,
                        "status": status,
                        "noun": noun,
                        "uses": top["uses"],
                        "quality": rng.uniform(2.4, 4.9),
                    }
                )
    # Popularity: a Zipf-like weight over a random order, so bestsellers are well separated.
    order = list(range(len(products)))
    rng.shuffle(order)
    for rank, index in enumerate(order):
        products[index]["weight"] = 1.0 / (rank + 1) ** 0.9
    return products


def _seed_customers(
    conn: sqlite3.Connection, rng: random.Random, vocab: dict[str, Any]
) -> list[dict[str, Any]]:
    people = [tuple(entry) for entry in vocab["webarena_customers"]]
    emails = {email for email, _, _ in people}
    while len(people) < len(vocab["webarena_customers"]) + N_EXTRA_CUSTOMERS:
        first, last = rng.choice(vocab["first_names"]), rng.choice(vocab["last_names"])
        email = f"{first.lower()}.{last.lower()}{rng.randint(1, 99)}@example.com"
        if email not in emails:
            emails.add(email)
            people.append((email, first, last))
    customers = []
    for index, (email, first, last) in enumerate(people):
        street, city, region, postcode = vocab["addresses"][index % len(vocab["addresses"])]
        phone = f"555-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}"
        created = fmt(datetime(2021, 6, 1) + timedelta(seconds=rng.randrange(180 * 86400)))
        cid = conn.execute(
            "INSERT INTO customer (email, firstname, lastname, password_hash, created_at, street, "
            "city, region,"
            " postcode, country, telephone) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                email,
                first,
                last,
                hash_password(CUSTOMER_PASSWORD, salt(rng)),
                created,
                street,
                city,
                region,
                postcode,
                "United States",
                phone,
            ),
        ).lastrowid
        weight = 6.0 if index == 0 else rng.uniform(0.5, 3.0)
        customers.append(
            {
                "id": cid,
                "email": email,
                "first": first,
                "last": last,
                "street": street,
                "city": city,
                "region": region,
                "postcode": postcode,
                "phone": phone,
                "weight": weight,
            }
        )
    return customers


def _seed_reviews(
    conn: sqlite3.Connection,
    rng: random.Random,
    vocab: dict[str, Any],
    products: list[dict[str, Any]],
    customers: list[dict[str, Any]],
) -> None:
    rows = []
    for product in products:
        count = min(int(rng.expovariate(1 / 2.8)), 12)
        for _ in range(count):
            rating = max(1, min(5, round(rng.gauss(product["quality"], 1.0))))
            if rng.random() < 0.3:
                author = rng.choice(customers)
                customer_id, nickname = author["id"], author["first"]
            else:
                customer_id, nickname = None, rng.choice(vocab["first_names"])
            pool = (
                "review_positive" if rating >= 4 else "review_neutral" if rating == 3 else "review_negative"
            )
            sentences = rng.sample(vocab[pool], 2)
            detail = " ".join(
                s.format(noun=product["noun"].lower(), use=rng.choice(product["uses"])) for s in sentences
            )
            roll = rng.random()
            status = "approved" if roll < 0.92 else "pending" if roll < 0.98 else "not_approved"
            rows.append(
                (
                    random_time(rng),
                    product["id"],
                    customer_id,
                    nickname,
                    rng.choice(vocab["review_titles"][str(rating)]),
                    detail,
                    rating,
                    status,
                )
            )
    rows.sort(key=lambda row: (row[0], row[1]))
    conn.executemany(
        "INSERT INTO review (created_at, product_id, customer_id, nickname, title, detail, rating, status)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [(fmt(row[0]), *row[1:]) for row in rows],
    )


def _order_status(rng: random.Random, created: datetime) -> str:
    recent = created >= HISTORY_END - timedelta(days=45)
    choices: tuple[str, ...]
    weights: tuple[int, ...]
    if recent:
        choices, weights = ("pending", "processing", "complete", "holded", "canceled"), (35, 35, 20, 5, 5)
    else:
        choices, weights = ("complete", "canceled", "holded"), (79, 18, 3)
    return rng.choices(choices, weights)[0]


def _seed_orders(
    conn: sqlite3.Connection,
    rng: random.Random,
    products: list[dict[str, Any]],
    customers: list[dict[str, Any]],
) -> None:
    sellable = [p for p in products if p["status"] == 1]
    product_weights = [p["weight"] for p in sellable]
    customer_weights = [c["weight"] for c in customers]
    times = sorted(random_time(rng) for _ in range(N_ORDERS))
    for created in times:
        customer = rng.choices(customers, customer_weights)[0]
        n_items = rng.choices((1, 2, 3, 4), (50, 30, 15, 5))[0]
        chosen: list[dict[str, Any]] = []
        while len(chosen) < n_items:
            candidate = rng.choices(sellable, product_weights)[0]
            if candidate not in chosen:
                chosen.append(candidate)
        items = [(p, rng.choices((1, 2, 3), (70, 22, 8))[0]) for p in chosen]
        total_qty = sum(qty for _, qty in items)
        subtotal = sum(p["price"] * qty for p, qty in items)
        shipping = FLAT_RATE_CENTS * total_qty
        status = _order_status(rng, created)
        updated = created + timedelta(hours=rng.randint(1, 96)) if status != "pending" else created
        order_id = conn.execute(
            "INSERT INTO sales_order (increment_id, customer_id, customer_email, customer_firstname,"
            " customer_lastname, status, hold_before_status, created_at, updated_at, subtotal_cents,"
            " shipping_cents, grand_total_cents, total_qty, ship_firstname, ship_lastname, "
            "ship_street, ship_city,"
            " ship_region, ship_postcode, ship_country, ship_telephone, shipping_method, payment_method)"
            " VALUES ('', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                customer["id"],
                customer["email"],
                customer["first"],
                customer["last"],
                status,
                "processing" if status == "holded" else None,
                fmt(created),
                fmt(updated),
                subtotal,
                shipping,
                subtotal + shipping,
                total_qty,
                customer["first"],
                customer["last"],
                customer["street"],
                customer["city"],
                customer["region"],
                customer["postcode"],
                "United States",
                customer["phone"],
                "Flat Rate - Fixed",
                "Check / Money order",
            ),
        ).lastrowid
        conn.execute("UPDATE sales_order SET increment_id = ? WHERE id = ?", (f"{order_id:09d}", order_id))
        conn.executemany(
            "INSERT INTO sales_order_item (order_id, product_id, sku, name, price_cents, qty, "
            "row_total_cents)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(order_id, p["id"], p["sku"], p["name"], p["price"], qty, p["price"] * qty) for p, qty in items],
        )
        history = [("pending", "Order placed.", created)]
        if status != "pending":
            history.append((status, f"Order status changed to {status}.", updated))
        conn.executemany(
            "INSERT INTO order_status_history (order_id, status, comment, created_at) VALUES (?, ?, ?, ?)",
            [(order_id, st, comment, fmt(at)) for st, comment, at in history],
        )
