-- Schema of the embedded shop (storefront + admin share it: one logical Magento). Money is in integer cents.
CREATE TABLE category (
    id INTEGER PRIMARY KEY,
    parent_id INTEGER REFERENCES category(id),
    name TEXT NOT NULL,
    url_path TEXT NOT NULL UNIQUE,
    position INTEGER NOT NULL
);
CREATE TABLE product (
    id INTEGER PRIMARY KEY,
    sku TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    url_key TEXT NOT NULL UNIQUE,
    category_id INTEGER NOT NULL REFERENCES category(id),
    price_cents INTEGER NOT NULL CHECK (price_cents >= 0),
    qty INTEGER NOT NULL CHECK (qty >= 0),
    status INTEGER NOT NULL CHECK (status IN (1, 2)),  -- 1 enabled, 2 disabled (Magento's codes)
    description TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX product_category ON product(category_id);
CREATE TABLE customer (
    id INTEGER PRIMARY KEY,
    email TEXT NOT NULL UNIQUE,
    firstname TEXT NOT NULL,
    lastname TEXT NOT NULL,
    password_hash TEXT NOT NULL,
    created_at TEXT NOT NULL,
    street TEXT NOT NULL,
    city TEXT NOT NULL,
    region TEXT NOT NULL,
    postcode TEXT NOT NULL,
    country TEXT NOT NULL,
    telephone TEXT NOT NULL
);
CREATE TABLE review (
    id INTEGER PRIMARY KEY,
    product_id INTEGER NOT NULL REFERENCES product(id),
    customer_id INTEGER REFERENCES customer(id),
    nickname TEXT NOT NULL,
    title TEXT NOT NULL,
    detail TEXT NOT NULL,
    rating INTEGER NOT NULL CHECK (rating BETWEEN 1 AND 5),
    status TEXT NOT NULL CHECK (status IN ('approved', 'pending', 'not_approved')),
    created_at TEXT NOT NULL
);
CREATE INDEX review_product ON review(product_id);
CREATE TABLE sales_order (
    id INTEGER PRIMARY KEY,
    increment_id TEXT NOT NULL UNIQUE,
    customer_id INTEGER NOT NULL REFERENCES customer(id),
    customer_email TEXT NOT NULL,
    customer_firstname TEXT NOT NULL,
    customer_lastname TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'processing', 'complete', 'canceled', 'holded')),
    hold_before_status TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    subtotal_cents INTEGER NOT NULL,
    shipping_cents INTEGER NOT NULL,
    grand_total_cents INTEGER NOT NULL,
    total_qty INTEGER NOT NULL,
    ship_firstname TEXT NOT NULL,
    ship_lastname TEXT NOT NULL,
    ship_street TEXT NOT NULL,
    ship_city TEXT NOT NULL,
    ship_region TEXT NOT NULL,
    ship_postcode TEXT NOT NULL,
    ship_country TEXT NOT NULL,
    ship_telephone TEXT NOT NULL,
    shipping_method TEXT NOT NULL,
    payment_method TEXT NOT NULL
);
CREATE INDEX sales_order_customer ON sales_order(customer_id);
CREATE INDEX sales_order_created ON sales_order(created_at);
CREATE TABLE sales_order_item (
    id INTEGER PRIMARY KEY,
    order_id INTEGER NOT NULL REFERENCES sales_order(id),
    product_id INTEGER NOT NULL REFERENCES product(id),
    sku TEXT NOT NULL,
    name TEXT NOT NULL,
    price_cents INTEGER NOT NULL,
    qty INTEGER NOT NULL CHECK (qty > 0),
    row_total_cents INTEGER NOT NULL
);
CREATE INDEX sales_order_item_order ON sales_order_item(order_id);
CREATE TABLE order_status_history (
    id INTEGER PRIMARY KEY,
    order_id INTEGER NOT NULL REFERENCES sales_order(id),
    status TEXT NOT NULL,
    comment TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE quote_item (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customer(id),
    product_id INTEGER NOT NULL REFERENCES product(id),
    qty INTEGER NOT NULL CHECK (qty > 0),
    UNIQUE (customer_id, product_id)
);
CREATE TABLE wishlist_item (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customer(id),
    product_id INTEGER NOT NULL REFERENCES product(id),
    added_at TEXT NOT NULL,
    UNIQUE (customer_id, product_id)
);
CREATE TABLE admin_user (
    id INTEGER PRIMARY KEY,
    username TEXT NOT NULL UNIQUE,
    firstname TEXT NOT NULL,
    lastname TEXT NOT NULL,
    email TEXT NOT NULL,
    password_hash TEXT NOT NULL
);
CREATE TABLE oauth_token (
    token TEXT PRIMARY KEY,
    admin_user_id INTEGER NOT NULL REFERENCES admin_user(id),
    created_at TEXT NOT NULL
);
CREATE TABLE contact_message (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL,
    telephone TEXT NOT NULL,
    comment TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE session (
    token TEXT PRIMARY KEY,
    site TEXT NOT NULL,
    user_id INTEGER,
    flash TEXT NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL
);
CREATE TABLE site_clock (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    now TEXT NOT NULL
);
