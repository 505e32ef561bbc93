"""The English phrase tables of the QC demo data (``ark-trainer demo --lang en``).

The same six scenarios, cues, apologies and flawed replies as the Chinese tables in
:mod:`ark_trainer.app.demo.data`, table for table and of the same sizes, written for a small English model.
Every cue breaks its rule by the graders' own English patterns (:mod:`ark_trainer.rewards.qc`): an abuse cue
holds an abuse word, a promise cue a promise, a deflection cue a deflection; a privacy cue holds someone
else's 11-digit mobile or 18-character ID number. Phrases start in lower case: the generator capitalises a
sentence where it starts.
"""

from __future__ import annotations

from ark_trainer.app.demo.phrasebook import Phrasebook, Scenario

SCENARIOS: dict[str, Scenario] = {
    "lost_parcel": Scenario(
        (
            "my parcel {order} shows as delivered, but I never got it",
            "parcel {order} hasn't moved for days, is it lost?",
            "I can't find my parcel {order}, what is going on?",
            "it says delivered but nobody at home received it, order {order}",
        ),
        ("how long until I hear back?", "I need it urgently, can you hurry?", "what if it's really lost?"),
        (
            "let me check the tracking record for you",
            "I've logged the lost parcel and will contact the depot",
            "I've asked the courier to call you back",
            "we will verify the delivery with the depot",
        ),
        (
            "we will find out where your parcel is as soon as possible",
            "I'll contact the depot for you right away",
            "we will follow up on the lost parcel and get back to you",
        ),
    ),
    "refund": Scenario(
        (
            "my refund has not arrived after a week, order {order}",
            "I sent the return for order {order} back already, where is my money?",
            "my refund for order {order} was rejected, why?",
            "you said I'd get a refund within {days} days, still nothing",
        ),
        (
            "when exactly will I get it back?",
            "I want the money back soon.",
            "if this drags on I'll complain.",
        ),
        (
            "let me check the refund progress for you",
            "the system shows the warehouse is still inspecting the return",
            "I've submitted an urgent review for you",
            "the refund will go back to your original payment account",
        ),
        (
            "we will process your refund as soon as possible",
            "I'll follow up on the refund for you right away",
            "we will check it and handle it urgently",
        ),
    ),
    "billing": Scenario(
        (
            "this month's bill charged me {amount} dollars too much",
            "I was charged {amount} dollars for a service I never signed up for",
            "bill {order} has a duplicate charge",
            "why is this month's bill suddenly {amount} dollars higher?",
        ),
        ("can I get the extra money back?", "will this happen again?", "you owe me an explanation."),
        (
            "let me check this month's charges for you",
            "the system shows an add-on service is being billed",
            "I've submitted a bill review for you",
            "I've cancelled that service for you",
        ),
        (
            "we will verify the charges for you as soon as possible",
            "I'll review the bill for you right away",
            "we will check the bill and refund the extra charge",
        ),
    ),
    "membership": Scenario(
        (
            "my membership renewed by itself and charged me {amount} dollars",
            "I've been a member for {days} days and still can't watch anything",
            "my {amount} points suddenly dropped to zero",
            "the perks of my annual membership don't work, order {order}",
        ),
        ("can you cancel it for me?", "can you restore my points?", "so I paid for nothing?"),
        (
            "let me check your membership status",
            "I've turned off auto-renewal for you",
            "the system shows the points expired at the start of the month",
            "I've submitted a request to restore your perks",
        ),
        (
            "we will restore your membership perks as soon as possible",
            "I'll check the renewal record for you right away",
            "we will follow up on your points and reply soon",
        ),
    ),
    "repair": Scenario(
        (
            "the washing machine I just bought broke after {days} days",
            "my phone has been in repair for two weeks, ticket {order}",
            "the air conditioner stopped cooling again {days} days after the repair",
            "the repair technician didn't show up again, ticket {order}",
        ),
        ("can I get a new one?", "when will it be fixed?", "when is the technician actually coming?"),
        (
            "let me book another technician visit for you",
            "I've logged the repair for you, ticket {order}",
            "let me check the repair progress",
            "I've asked the repair centre to speed up",
        ),
        (
            "we will send a technician as soon as possible",
            "I'll chase the repair progress for you right away",
            "we will follow up on the repair until it is resolved",
        ),
    ),
    "late_order": Scenario(
        (
            "order {order} was supposed to ship yesterday and still hasn't",
            "what I bought has been on the way for {days} days",
            "it's been five days and order {order} hasn't left the warehouse",
            "the pre-order said it would ship within {days} days, still nothing",
        ),
        ("when exactly will it arrive?", "can you hurry them up?", "otherwise I'll cancel it."),
        (
            "let me ask the warehouse to ship it",
            "the system shows the order is being packed",
            "I've flagged the order for priority shipping",
            "let me check the estimated delivery time",
        ),
        (
            "we will push the warehouse to ship as soon as possible",
            "I'll follow up on the delivery for you right away",
            "we will check the reason for the delay and handle it soon",
        ),
    ),
}

GREETINGS = (
    "Hello, how can I help you?",
    "Hello, this is the customer service centre, go ahead.",
    "Hello, happy to be of service.",
)
APOLOGIES = (
    "I'm very sorry",
    "sorry for the trouble",
    "sorry to keep you waiting",
    "I apologise, that was our mistake",
    "sorry for the inconvenience",
    "I'm really sorry",
)
CUES: dict[str, tuple[str, ...]] = {
    "辱骂": (
        "are you stupid, it's all written there",
        "so annoying, stop asking and shut up",
        "what is wrong with you, you idiot, chasing me every day",
        "what a moron, I've said it a hundred times",
        "any idiot knows you have to wait",
        "are you dumb or something",
        "take it or leave it, get lost",
        "asking a question like that, you are useless",
        "are you blind, read the notice",
    ),
    "泄露隐私": (
        "the previous customer {other}'s phone is {phone}, ask them",
        "the recipient {other}'s mobile is {phone}, call them directly",
        "this order was actually placed by {other}, ID number {idno}",
        "{other} complained too, their number is {phone}",
        "the account holder is {other}, number {phone}",
        "{other}'s ID card {idno} is in the system, compare it",
    ),
    "违规承诺": (
        "I guarantee you a full refund",
        "don't worry, you will get double compensation",
        "100% it arrives tomorrow",
        "absolutely no problem, I'll cover it out of my own pocket",
        "I promise to refund you twice the money",
        "you'll get 500 dollars compensation for sure",
        "I'll slip you another 300 dollars out of my own pocket",
    ),
    "推诿": (
        "that's not my job",
        "go find the courier company",
        "ask someone else, not me",
        "nothing I can do, go ask the seller",
        "that's not our problem, go ask your bank",
        "none of my business, go ask at the depot",
    ),
}
REPLY_APOLOGIES = (
    "we are very sorry for the inconvenience",
    "sorry to have kept you waiting",
    "we apologise for the trouble",
    "sorry for the worry this caused",
    "sorry this spoiled your experience",
    "please accept our sincere apologies",
)
TYPE_APOLOGIES: dict[str, tuple[str, ...]] = {
    "辱骂": ("we deeply apologise for our agent's rude words", "sorry for our agent's bad attitude"),
    "泄露隐私": ("sorry, that information should never have been shared", "we deeply apologise for the leak"),
    "违规承诺": ("sorry, our earlier answer was not accurate", "apologies, what we said before was wrong"),
    "推诿": ("sorry we did not take care of you straight away", "apologies for not handling this at once"),
}
FLAWED_REPLIES: dict[str, tuple[str, ...]] = {
    "no_apology": ("{fix}, please wait patiently.", "please wait patiently, {fix}.", "{fix}."),
    "phone": (
        "you can call {phone} directly.",
        "I've noted the number {phone}, {fix}.",
        "their number is {phone}, contact them yourself.",
    ),
    "deflection": (
        "that's not my job, ask somewhere else.",
        "go find the seller to handle it.",
        "ask someone else about this.",
        "nothing I can do, please try another channel.",
    ),
    "promise": (
        "we guarantee a full refund, don't worry.",
        "a full refund for sure, don't worry.",
        "100% resolved for you, we cover everything.",
        "we promise a refund and double compensation.",
    ),
}
SURNAMES = (
    "Smith",
    "Johnson",
    "Brown",
    "Taylor",
    "Wilson",
    "Davies",
    "Evans",
    "Thomas",
    "Walker",
    "Wright",
    "Clark",
    "Hall",
    "Green",
    "Lewis",
    "Wood",
    "Harris",
    "Martin",
    "Cooper",
    "King",
    "Baker",
)
GIVEN_NAMES = (
    "James",
    "Mary",
    "Robert",
    "Linda",
    "David",
    "Susan",
    "John",
    "Karen",
    "Michael",
    "Emma",
    "Daniel",
    "Sarah",
    "Paul",
    "Laura",
    "Mark",
    "Anna",
    "Peter",
    "Helen",
)

ENGLISH = Phrasebook(
    lang="en",
    instruction="Inspect this customer-service dialogue: give the verdict, the violation type and a suggested reply.",
    customer="Customer: ",
    agent="Agent: ",
    scenarios=SCENARIOS,
    greetings=GREETINGS,
    apologies=APOLOGIES,
    cues=CUES,
    reply_apologies=REPLY_APOLOGIES,
    type_apologies=TYPE_APOLOGIES,
    flawed_replies=FLAWED_REPLIES,
    short_apologies=("sorry", "apologies"),
    surnames=SURNAMES,
    given_names=GIVEN_NAMES,
    name_format="{given} {surname}",
    comma=", ",
    full_stop=".",
    end_marks=".?!",
    dialogue_chars=(120, 330),  # the Chinese bounds' share of dialogues kept (~90%)
    capitalise=True,
)
