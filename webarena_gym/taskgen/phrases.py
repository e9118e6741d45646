"""Fixed text pools for the slots of state-changing and unachievable templates (new names, comments, ...).

Each pool is cycled deterministically by the templates; none of its items occurs in the seeded world (the
templates check where it matters), so a check that requires one of them cannot pass before the agent acts.
"""

from __future__ import annotations

STREETS = (
    "742 Evergreen Terrace",
    "1600 Amphitheatre Pkwy",
    "31 Spooner Street",
    "12 Grimmauld Place",
    "221 Baker Street",
    "4 Privet Drive",
    "177A Bleecker Street",
    "350 Fifth Avenue",
)
PERSON_NAMES = (
    ("Emily", "Lopez"),
    ("Emma", "Lopez-Garcia"),
    ("Emma", "Stone"),
    ("Emily", "Clarke"),
    ("Olivia", "Lopez"),
    ("Ava", "Martinez"),
    ("Mia", "Thompson"),
    ("Emma", "Laurent"),
)
REVIEW_NICKNAMES = ("QuietBuyer", "ThriftyOwl", "CouchReviewer", "MapleShopper", "GadgetGran", "TinyTester")
REVIEW_TITLES = (
    "Exactly as described",
    "Would not buy again",
    "Great value for money",
    "Stopped working after a week",
    "Better than expected",
    "Just okay",
)
REVIEW_TEXTS = (
    "Arrived quickly and works as advertised.",
    "The build quality is disappointing for the price.",
    "I use it every day and it still looks new.",
    "Customer service replaced it without any fuss.",
    "My kids love it, we bought a second one.",
    "It does the job, nothing special.",
)
ORDER_COMMENTS = (
    "Payment received, preparing shipment.",
    "Customer called to confirm the address.",
    "Shipped with tracking number 1Z999AA10123456784.",
    "Gift wrapping requested by the customer.",
    "Delayed because of a supplier backorder.",
    "Verified stock, ready to pack.",
)
FORUM_COMMENTS = (
    "Thanks for sharing, this was really helpful!",
    "I had the exact same experience last month.",
    "Could you post an update when you know more?",
    "This is the best thing I have read all week.",
    "Respectfully, I disagree with most of this.",
    "Saving this thread for later.",
)
FORUM_BIOS = (
    "Amateur astronomer and weekend baker.",
    "Reading my way through the classics.",
    "Pittsburgh born, coffee powered.",
    "I mostly lurk, sometimes I post.",
    "Vinyl collector since 1998.",
    "Learning machine learning one paper at a time.",
)
FORUM_TITLES = (
    "What are you reading this weekend?",
    "Looking for recommendations from this community",
    "A small milestone I wanted to share",
    "Is it just me or has this changed lately?",
    "Weekly discussion thread: share your wins",
    "Beginner question, please be kind",
)
FORUM_BODIES = (
    "I have been thinking about this for a while and would love to hear your opinions.",
    "Long time lurker, first post. Be gentle!",
    "Details in the comments, ask me anything.",
    "Curious whether others noticed the same thing.",
    "Any pointers are welcome, thanks in advance.",
    "Sharing this because it made my day.",
)
NEW_POST_TITLES = (
    "Updated: my thoughts after a month",
    "Edit: what I learned from this",
    "Follow-up to my earlier post",
    "Revisited after reading your replies",
    "Part two of my story",
    "Final update on this",
)
FAKE_PRODUCTS = (
    "Aurelo Espresso Machine, Brushed Steel",
    "Quantix Robot Lawn Mower, Green",
    "Kestrel Heated Ski Gloves",
    "Voltaic Smart Aquarium Kit",
    "Lumina Electric Unicycle, 14 inch",
    "Harvest Lane Truffle Honey Set",
)
FAKE_CUSTOMERS = ("Bartholomew Quill", "Ingrid Vasquez-Holt", "Theodore Pennywhistle", "Marguerite Oyelaran")
FAKE_FORUMS = ("gardening", "cycling", "astronomy", "woodworking", "photography")
