"""Adversarial judge pairs: two entries alike but for one swapped or changed binding.

    python bench/judge_labels_v2/swaps.py        # prints the pairs, one JSON object a line

Six generators, one per thing that can be swapped: ``number``, ``unit``, ``date``, ``name``, ``role`` (who
did what to whom) and ``negation``. Each has its own hand-written items in several styles (mem0-style
facts, first-person notes, chat turns, longer summaries), so no two share a template. An item's text
marks what differs between the two entries: ``{x|y}`` puts ``x`` in entry A and ``y`` in entry B. A
``[p|q]`` marks a harmless rewording: both entries say ``p``, except in the pairs the seeded generator
picks to reword, where B says ``q``, so that the swap does not always come with otherwise identical text.
Entry A or B goes first at random (seeded), and some pairs get a neutral frame on both sides.

None of these pairs may be deleted, and none merged into an entry that loses which value goes with what.
Deterministic: the same seed gives the same pairs.
"""

from __future__ import annotations

import json
import random
import re

SEED = 44
GENERATORS = ("number", "unit", "date", "name", "role", "negation")

ITEMS: dict[str, tuple[str, ...]] = {
    "number": (
        "Locker code at the climbing gym is {4471|4417}",
        "Wren: the wedding order is {30|36} table centrepieces, due Saturday.",
        "I [paid|spent] {62|26} euros for the concert tickets.",
        "Flight {BA 482|BA 284} leaves from gate {17|71} at 6:40.",
        "Apartment {14|41} on the 3rd floor belongs to Mrs. Dorsey.",
        "Dad's blood pressure this morning was {142/88|124/88}.",
        "Room booking: {6|8} people, Friday dinner at La Palma.",
        "The kids' school is number {12|21} on Harbour Road.",
        "Teodor said the band [sold|shipped] {6,400|4,600} records in the first week.",
        "Our wifi password ends in {8812|8821}.",
        "Bus {73|37} [goes|runs] straight from the flat to the hospital.",
        "Mum takes {2|3} tablets of paracetamol at night when her hip hurts.",
        "Ilse got {92|82} points in the final exam.",
        "The landlord wants {3|2} months' deposit for the Fenwick Road flat.",
        "Passport number ends in {5530|5503}; renewal due next year.",
        "Jonah is {8|9} and in year 4.",
        "I ran {21|12} km [on Sunday|last Sunday] with the club.",
    ),
    "unit": (
        "Give Rolo {1 cup|1 tablespoon} of the senior food in the evening.",
        "The wardrobe is {2 metres|2 feet} wide, check before ordering.",
        "Dose: amoxicillin {500 mg|500 ml} three times a day for a week.",
        "Imani: the arch needs {40 stems|40 bunches} of eucalyptus.",
        "I [walked|hiked] {12 miles|12 km} along the coast path today.",
        "Rent is 900 euros a {month|week} for the studio.",
        "Paid the plumber {150 euros|150 dollars} in cash.",
        "The turkey weighs {6 kg|6 lb}, so it goes in the oven at 10 am.",
        "Bought {3 kg|3 lb} of flour for the birthday cake.",
        "Baby Noor drinks {120 ml|120 oz} of milk at each feed.",
        "The commute is {40 minutes|40 kilometres} each way.",
        "Ottilie's scholarship pays {£12,000|€12,000} a year.",
        "The pond should be {1.5 metres|1.5 feet} deep [at the centre|in the middle].",
        "Finn grew {5 cm|5 inches} since last summer.",
        "Set the oven to {180 °C|180 °F} for the sourdough.",
        "Grandpa Ruben swims {400 metres|400 yards} every morning in the harbour.",
    ),
    "date": (
        "Dentist appointment on {14 March|14 May} at 9:20.",
        "Callum: the party is on {Saturday|Sunday} the 9th, 7 pm.",
        "Beatriz's results come out on {15 August|15 July}.",
        "Moved to Valencia in {2023|2021}.",
        "Car insurance renews on {1 April|4 January}.",
        "Ingrid's night shifts start in {January|June}.",
        "I [booked|reserved] the train for {22 December|22 November} at 9:05.",
        "Yannick: we close the café on {28 November|28 October} this year.",
        "Wedding anniversary is {3 June|6 March}.",
        "The visa expires on {30 September 2025|30 September 2026}.",
        "Yoga class moved to {Wednesdays|Thursdays} at 18:00.",
        "Soraya's parents arrive on {20 December|12 December} and stay three weeks.",
        "Started the new job in {March|May} 2024.",
        "Physio [sessions are|is] on {Mondays and Wednesdays|Tuesdays and Thursdays} at 9.",
        "Granddad Joe was born in {1948|1984} in Cork.",
        "Bin collection day is {Tuesday|Thursday}.",
    ),
    "name": (
        "{Maren|Karen} is a pediatrician in Leipzig.",
        "Odile: {Pickle|Pretzel} is scared of the hoover.",
        "Lunch with {Marta|Carla} on Friday at 1 pm at the Thai place.",
        "My manager is {David Cho|David Chen}.",
        "{Mr. Okafor|Mr. Okoro} [fitted|set up] the road bike at the shop on Dale Street.",
        "Book club is reading {Kindred|Beloved} this month.",
        "{Inés|Iris} runs the farmers market stall on Sundays.",
        "The vet for Rolo is Dr. {Haley|Hanley} at Northside Animal Clinic.",
        "Sanne: the contractor is {De Groot|De Graaf}, site manager Wouter.",
        "We're staying at the {Savoy|Strand} Hotel in Bath.",
        "Matteo supports {Torino|Juventus}.",
        "{Karim|Kamal} checks on Mum every morning.",
        "Flying {KLM|Lufthansa} to Lyon on the 12th.",
        "Ottilie got into vet school at {Utrecht|Ghent}.",
        "Dinner at {Bellini's|Berlini's} in Chapel Street on Valentine's Day.",
        "{Annika|Anneke} lives in Bergen with Lars and their son Eirik.",
    ),
    "role": (
        "{Tom|Ana} lent {Ana|Tom} 40 euros for the concert tickets.",
        "{Ravi|Elsa} congratulated {Elsa|Ravi} on the Grade 8 distinction.",
        "{Harold|June} taught {June|Harold} to play chess.",
        "Declan: {Fiona|I} paid the €300 deposit and {I|Fiona} sent half back.",
        "{The landlord|Bilal} owes {Bilal|the landlord} 120 dollars for the boiler repair.",
        "{Tobias|Mira} broke up with {Mira|Tobias} in May.",
        "Joelle {hired|was hired by} Kayla for the Ashford wedding.",
        "{Wren|Imani} [covers|opens] the shop on Thursday while {Imani|Wren} does the deliveries.",
        "{Freya|Signe} beat {Signe|Freya} at the bouldering competition.",
        "Chioma's {mother|brother} drove her {brother|mother} to the airport at 5 am.",
        "{Walter|Ignacio} won the chess game against {Ignacio|Walter} on Sunday.",
        "{Esme|Arjun} is picking up {Arjun|Esme} from the airport on Friday.",
        "The {buyer|seller} pays the notary fee, the {seller|buyer} pays the agent.",
        "{Nell|Otto} gave {Otto|Nell} her old bike.",
        "In the meeting, {Keira|Dolores} reported to {Dolores|Keira} about the oven.",
        "{Layan|Rasha} is the older sister; {Rasha|Layan} is two years younger.",
    ),
    "negation": (
        "I {eat|don't eat} pork.",
        "Ingrid is {allergic|not allergic} to penicillin.",
        "Harold {will|won't} come to the choir concert on 6 July.",
        "The Fenwick Road flat {allows|doesn't allow} pets.",
        "Yannick {has|has never} been to Marrakesh.",
        "I {kept|didn't keep} the receipt for the stroller.",
        "Chioma {likes|doesn't like} working night shifts.",
        "The café is {open|closed} on Mondays.",
        "Dad {can|can't} drive after the knee surgery.",
        "Freya: I {have already|haven't yet} [told Signe|talked to Signe] about the Oslo offer.",
        "Nell {wants|no longer wants} to be a vet.",
        "The insurance {covers|doesn't cover} dental check-ups.",
        "Walter {has|hasn't} sold the flat in Bath.",
        "Rolo {is|isn't} neutered.",
        "We {still need|don't need} to buy oat milk this week.",
        "Fiona {is|isn't} vegetarian, so {plan|no need for} a veggie main.",
    ),
}

FRAMES = ("{}", "{}", "{}", "Reminder: {}", "From chat: {}", "{} (noted)")

_SWAP = re.compile(r"\{([^{}|]*)\|([^{}|]*)\}")
_REWORD = re.compile(r"\[([^\[\]|]*)\|([^\[\]|]*)\]")


def render(item: str, side: int, reword: bool) -> str:
    """The text of one side (0 = A, 1 = B) of an item; ``reword`` lets side B take the ``[p|q]`` wording."""
    text = _SWAP.sub(lambda m: m.group(1 + side), item)
    return _REWORD.sub(lambda m: m.group(2 if reword and side == 1 else 1), text)


def pairs(seed: int = SEED) -> list[dict]:
    """Every generator's pairs: ``{generator, a, b}``, in a fixed order."""
    out = []
    for gen in GENERATORS:
        rng = random.Random(f"{seed}-{gen}")
        for item in ITEMS[gen]:
            reword = rng.random() < 0.5
            frame = rng.choice(FRAMES) if not re.match(r"\w+: ", item) else "{}"  # a chat turn keeps its speaker first
            a, b = (frame.format(render(item, side, reword)) for side in (0, 1))
            if rng.random() < 0.5:
                a, b = b, a
            out.append({"generator": gen, "a": a, "b": b})
    return out


if __name__ == "__main__":
    for row in pairs():
        print(json.dumps(row, ensure_ascii=False))
