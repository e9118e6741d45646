"""JavaScript locators of the program_html checks (run inside the page by the evaluator, as in WebArena).

Each selects a short, normalised text from one page of the embedded sites, so a check can require an exact
value or a line that only the intended change produces (e.g. ``"<product> x 2"`` in the cart). A locator that
finds nothing throws in the page, which the evaluator scores as an empty selection.
"""

from __future__ import annotations

CART_LINES = (
    "[...document.querySelectorAll('#cart-form tbody tr')]"
    ".map(r => r.cells[0].innerText + ' x ' + r.querySelector('input').value).join('\\n')"
)
"""Storefront cart (``/checkout/cart/``): one ``<name> x <qty>`` line per item."""

WISHLIST_LINES = (
    "[...document.querySelectorAll('table[aria-label=\"Wish list items\"] tbody tr')]"
    ".map(r => r.cells[0].innerText).join('\\n')"
)
"""Storefront wish list (``/wishlist/``): one product name per line."""

ORDER_ITEM_LINES = (
    "[...document.querySelectorAll('section[aria-labelledby=\"items\"] table:first-of-type tbody tr')]"
    ".map(r => r.cells[0].innerText + ' x ' + r.cells[3].innerText).join('\\n')"
)
"""Storefront order page: one ``<name> x Ordered: <qty>`` line per item."""

ACCOUNT_CONTACT = "document.querySelector('section[aria-labelledby=\"info\"] p').innerText"
"""Storefront account dashboard: the contact block (name, e-mail)."""

ACCOUNT_ADDRESS = "document.querySelector('section[aria-labelledby=\"addr\"] address').innerText"
"""Storefront account dashboard: the default shipping address."""

PRODUCT_REVIEW_LINES = (
    "[...document.querySelectorAll('article[aria-label^=\"Review by\"]')]"
    ".map(a => a.getAttribute('aria-label') + ' | ' + a.querySelector('h3').innerText).join('\\n')"
)
"""Storefront product page: one ``Review by <nickname> | <summary>`` line per published review."""

ADMIN_ORDER_STATUS = (
    "[...document.querySelectorAll('section[aria-labelledby=\"info\"] tr')]"
    ".filter(r => r.cells[0].innerText === 'Order Status').map(r => r.cells[1].innerText).join('')"
)
"""Admin order page: the order status label."""

ADMIN_ORDER_HISTORY = (
    "[...document.querySelectorAll('ul[aria-label=\"Order history\"] li')]"
    ".map(li => li.innerText).join('\\n')"
)
"""Admin order page: the status history, ``<time> | <status> | <comment>`` per line."""

ADMIN_PRODUCT_PRICE = "document.querySelector('#price').value"
"""Admin product edit page: the price field (``12.50``)."""

ADMIN_PRODUCT_STATUS = "document.querySelector('#status').selectedOptions[0].innerText"
"""Admin product edit page: ``Enabled`` or ``Disabled``."""

FORUM_BIOGRAPHY = "document.querySelector('section[aria-labelledby=\"bio\"] p').innerText"
"""Forum user page: the biography text."""

FORUM_POST_UPVOTED = (
    "document.querySelector('button[aria-label=\"Upvote this post\"]').getAttribute('aria-pressed')"
)
"""Forum post page: ``true`` when the logged-in user upvoted the post."""

FORUM_POST_HEADER = (
    "document.querySelector('#post-title').innerText + ' | ' + "
    "document.querySelector('main article p.muted a').innerText + ' | ' + "
    "document.querySelector('main article p.muted a[href^=\"/f/\"]').innerText"
)
"""Forum post page: ``<title> | <author> | f/<forum>``."""

FORUM_POST_BODY = "document.querySelector('main article > div').innerText"
"""Forum post page: the body text."""

FORUM_POST_TITLE = "document.querySelector('#post-title').innerText"
"""Forum post page: the title."""

FORUM_COMMENT_LINES = (
    "[...document.querySelectorAll('article.comment')]"
    ".map(a => a.querySelector('p.muted a').innerText + ': '"
    " + a.querySelector(':scope > p:nth-of-type(2)').innerText)"
    ".join('\\n')"
)
"""Forum post page: one ``<author>: <comment>`` line per comment."""
