"""What the generated agents do: tasks with tools, arguments, results and answers, and the ways real agents
get them wrong (a changed argument, a missing or extra call, swapped calls, no answer).

A :class:`Task` is format-free; :mod:`standins.formats` renders it as observation rows in one of the
formats the extraction recognises. The *ideal* task is what a dataset item expects; a trace is the ideal
task, possibly deviated.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

CITIES = ["Paris", "Tokyo", "Berlin", "Madrid", "Lima", "Oslo", "Cairo", "Hanoi", "Perth", "Quito", "São Paulo"]
NAMES = ["Ivan Petrov", "Ana García", "Li Wei", "John Smith", "Amara Okafor", "Sofia Rossi", "Kenji Sato"]
AIRLINES = [("AF", "Air France"), ("LH", "Lufthansa"), ("BA", "British Airways"), ("JL", "Japan Airlines")]
CARRIERS = ["UPS", "DHL", "FedEx"]
PRODUCTS = ["kettle", "toaster", "headphones", "lamp", "backpack", "blender"]
DEVIATIONS = ("changed_argument", "missing_call", "extra_call", "swapped_calls", "no_answer")
#: What goes wrong in production that no reference is needed to see (the reference-free checks):
#: the agent repeats a call, passes an argument of the wrong type, a tool fails, the answer is cut off.
PRODUCTION_FAULTS = ("loop", "invalid_call", "tool_error", "cut_off")


@dataclass(frozen=True)
class ToolDef:
    name: str
    description: str
    #: parameter name → JSON type
    params: dict[str, str]


@dataclass
class Step:
    tool: str
    args: dict[str, Any]
    result: Any
    #: What the agent says before the call (some formats carry text next to a call).
    say: str = ""


@dataclass
class Task:
    kind: str
    trace_name: str
    system: str
    question: str
    steps: list[Step]
    #: The final answer; None: the agent crashed before answering.
    answer: str | None
    goal: str
    topics: list[str]
    tools: list[ToolDef]
    tool_sequence_matters: bool = True
    #: Set on a deviated run: what went wrong (for the tests' expectations, never in the rows).
    deviation: str | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def reference_calls(self) -> list[dict[str, Any]]:
        return [{"name": s.tool, "arguments": s.args} for s in self.steps]


def _date(r: random.Random) -> str:
    return f"2026-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"


def flights(r: random.Random) -> Task:
    city, date, name = r.choice(CITIES), _date(r), r.choice(NAMES)
    code, airline = r.choice(AIRLINES)
    flight_id = f"{code}{r.randint(100, 999)}"
    price = r.randint(120, 900)
    options = [
        {"flight_id": flight_id, "airline": airline, "departure": f"{r.randint(6, 11):02d}:00", "price_usd": price},
        {
            "flight_id": f"{code}{r.randint(1000, 2999)}",
            "airline": airline,
            "departure": "14:35",
            "price_usd": price + 62,
        },
    ]
    ref = f"PNR{r.randint(1000, 9999)}"
    return Task(
        kind="flights",
        trace_name="flight-booking-agent",
        system="You are a travel assistant. Use the tools to search and book flights.",
        question=f"Book me a flight to {city} on {date}. Passenger: {name}.",
        steps=[
            Step("search_flights", {"destination": city, "date": date}, options, "Let me search flights."),
            Step(
                "book_flight", {"flight_id": flight_id, "passenger": name}, {"booking_ref": ref, "status": "confirmed"}
            ),
        ],
        answer=(
            f"Done! {name} is booked on {airline} {flight_id} to {city} on {date} ({price} USD). "
            f"Booking reference: {ref}."
        ),
        goal=f"{name} gets a flight to {city} on {date} booked",
        topics=["flights", "booking", "travel"],
        tools=[
            ToolDef("search_flights", "Search flights", {"destination": "string", "date": "string"}),
            ToolDef("book_flight", "Book a flight", {"flight_id": "string", "passenger": "string"}),
        ],
    )


def weather(r: random.Random) -> Task:
    city, units = r.choice(CITIES), r.choice(["celsius", "fahrenheit"])
    temp = r.randint(-5, 33)
    sky = r.choice(["sunny", "partly cloudy", "rainy", "overcast"])
    result = f"{city}: {temp}°{'C' if units == 'celsius' else 'F'}, {sky}, humidity {r.randint(30, 90)}%"
    return Task(
        kind="weather",
        trace_name="weather-agent",
        system="You answer weather questions. Always use get_weather.",
        question=f"What's the weather in {city} right now? {units.capitalize()} please.",
        steps=[Step("get_weather", {"city": city, "units": units}, result)],
        answer=f"It's {result.split(': ', 1)[1]} in {city} right now.",
        goal=f"The user learns the current weather in {city}",
        topics=["weather"],
        tools=[ToolDef("get_weather", "Current weather for a city", {"city": "string", "units": "string"})],
    )


def refund(r: random.Random) -> Task:
    order, product = f"A-{r.randint(1000, 9999)}", r.choice(PRODUCTS)
    total = round(r.uniform(15, 250), 2)
    refund_id = f"R-{r.randint(1000, 9999)}"
    return Task(
        kind="refund",
        trace_name="support-refund",
        system="You are Acme's support agent. Look orders up before refunding.",
        question=f"My order {order} arrived damaged. Can I get a refund?",
        steps=[
            Step(
                "lookup_order",
                {"order_id": order},
                {"order_id": order, "status": "delivered", "total": total, "items": [product]},
            ),
            Step(
                "issue_refund",
                {"order_id": order, "reason": "damaged"},
                f"Refund {refund_id} issued: {total:.2f} USD to the original card.",
            ),
        ],
        answer=(
            f"I'm sorry your {product} arrived damaged. I've issued refund {refund_id} for {total:.2f} USD "
            "to your original card."
        ),
        goal=f"The customer gets a refund for the damaged order {order}",
        topics=["refunds", "orders", "shipping damage"],
        tools=[
            ToolDef("lookup_order", "Look an order up", {"order_id": "string"}),
            ToolDef("issue_refund", "Refund an order", {"order_id": "string", "reason": "string"}),
        ],
    )


def order_status(r: random.Random) -> Task:
    order, carrier = f"B-{r.randint(10, 999)}", r.choice(CARRIERS)
    tracking = f"1Z{r.randint(10**15, 10**16 - 1)}"
    eta = _date(r)
    hub = r.choice(["Leipzig hub", "Memphis hub", "Cologne hub"])
    return Task(
        kind="order_status",
        trace_name="order-status",
        system="You track orders for customers.",
        question=f"Where is my order {order}?",
        steps=[
            Step(
                "lookup_order",
                {"order_id": order},
                {"order_id": order, "status": "in_transit", "carrier": carrier, "tracking_number": tracking},
            ),
            Step("track_parcel", {"carrier": carrier, "tracking_number": tracking}, {"location": hub, "eta": eta}),
        ],
        answer=f"Order {order} is in transit with {carrier} (now at the {hub}) and should arrive on {eta}.",
        goal=f"The customer learns where order {order} is and when it arrives",
        topics=["orders", "shipping"],
        tools=[
            ToolDef("lookup_order", "Look an order up", {"order_id": "string"}),
            ToolDef("track_parcel", "Track a parcel", {"carrier": "string", "tracking_number": "string"}),
        ],
    )


def billing(r: random.Random) -> Task:
    invoice, amount = f"INV-{r.randint(10, 999)}", float(r.randint(9, 199))
    charges = [{"id": "ch_1", "amount": amount}, {"id": "ch_2", "amount": amount}]
    return Task(
        kind="billing",
        trace_name="billing-assistant",
        system="You are Acme's billing assistant. Be precise about amounts.",
        question=f"Why was I charged twice for invoice {invoice}?",
        steps=[
            Step(
                "get_invoice",
                {"invoice_id": invoice},
                {"invoice_id": invoice, "charges": charges},
                f"Let me look at invoice {invoice}.",
            ),
            Step("refund_charge", {"charge_id": "ch_2"}, f"refunded ch_2: {amount:.2f} USD"),
        ],
        answer=(
            f"You were charged twice (ch_1 and ch_2, {amount:.2f} USD each). I've refunded the duplicate charge ch_2."
        ),
        goal=f"The duplicate charge on invoice {invoice} is refunded",
        topics=["billing", "refunds"],
        tools=[
            ToolDef("get_invoice", "Fetch an invoice", {"invoice_id": "string"}),
            ToolDef("refund_charge", "Refund one charge", {"charge_id": "string"}),
        ],
    )


def hotel(r: random.Random) -> Task:
    city, guest, nights = r.choice(CITIES), r.choice(NAMES), r.randint(1, 7)
    check_in = _date(r)
    hotel_id = f"H{r.randint(100, 999)}"
    price = r.randint(80, 420)
    return Task(
        kind="hotel",
        trace_name="hotel-booking-agent",
        system="You book hotels for travellers.",
        question=f"Find and book a hotel in {city} from {check_in} for {nights} nights for {guest}.",
        steps=[
            Step(
                "search_hotels",
                {"city": city, "check_in": check_in, "nights": nights},
                [{"hotel_id": hotel_id, "name": "Hotel Lutetia", "price_eur": price}],
            ),
            Step(
                "book_hotel", {"hotel_id": hotel_id, "guest": guest}, {"confirmation": f"HB{r.randint(10000, 99999)}"}
            ),
        ],
        answer=f"Booked Hotel Lutetia in {city} for {guest}, {nights} nights from {check_in}, {price} EUR per night.",
        goal=f"{guest} has a hotel in {city} booked from {check_in}",
        topics=["hotels", "booking", "travel"],
        tools=[
            ToolDef("search_hotels", "Search hotels", {"city": "string", "check_in": "string", "nights": "integer"}),
            ToolDef("book_hotel", "Book a hotel", {"hotel_id": "string", "guest": "string"}),
        ],
    )


def knowledge_base(r: random.Random) -> Task:
    topic = r.choice(["reset my router", "change my password", "update the firmware", "pair a bluetooth device"])
    return Task(
        kind="kb",
        trace_name="kb-agent",
        system="Answer from the knowledge base.",
        question=f"How do I {topic}?",
        steps=[
            Step(
                "search_kb",
                {"query": topic},
                [{"title": f"How to {topic}", "url": f"https://kb.example/{topic.replace(' ', '-')}"}],
            ),
        ],
        answer=(
            f"To {topic}, follow the steps in the article 'How to {topic}': "
            "open the settings page and follow the prompts."
        ),
        goal=f"The user learns how to {topic}",
        topics=["technical support"],
        tools=[ToolDef("search_kb", "Search the knowledge base", {"query": "string"})],
        tool_sequence_matters=False,
    )


TASKS: dict[str, Callable[[random.Random], Task]] = {
    "flights": flights,
    "weather": weather,
    "refund": refund,
    "order_status": order_status,
    "billing": billing,
    "hotel": hotel,
    "kb": knowledge_base,
}

_EXTRA = Step("get_weather", {"city": "Paris", "units": "celsius"}, "Paris: 18°C, sunny")
_EXTRA_TOOL = ToolDef("get_weather", "Current weather for a city", {"city": "string", "units": "string"})


def _changed(value: Any, r: random.Random) -> Any:
    if isinstance(value, int):
        return value + r.randint(1, 3)
    if isinstance(value, str):
        return value + "-X" if r.random() < 0.5 else value.upper()
    return value


def deviate(task: Task, r: random.Random, kind: str) -> Task:
    """The task as an agent that went wrong in one way (``kind`` in :data:`DEVIATIONS`) ran it."""
    steps = [replace(s, args=dict(s.args)) for s in task.steps]
    answer = task.answer
    tools = list(task.tools)
    error = None
    if kind == "changed_argument":
        step = r.choice(steps)
        key = r.choice(sorted(step.args))
        step.args[key] = _changed(step.args[key], r)
    elif kind == "missing_call" and len(steps) > 1:
        steps = steps[:-1]
        answer = "I started on this but could not finish; please try again later."
    elif kind == "extra_call":
        steps.insert(r.randrange(len(steps) + 1), replace(_EXTRA))
        if _EXTRA_TOOL not in tools:
            tools.append(_EXTRA_TOOL)
    elif kind == "swapped_calls" and len(steps) > 1:
        steps[0], steps[1] = steps[1], steps[0]
    elif kind == "no_answer":
        answer = None
        error = "RateLimitError: Error code: 429 - Rate limit reached"
    else:
        kind = "changed_argument"
        step = steps[0]
        key = sorted(step.args)[0]
        step.args[key] = _changed(step.args[key], r)
    return replace(task, steps=steps, answer=answer, tools=tools, deviation=kind, error=error)


def make_task(r: random.Random, kinds: tuple[str, ...] | None = None) -> Task:
    kind = r.choice(kinds or tuple(TASKS))
    return TASKS[kind](r)


def with_fault(task: Task, kind: str) -> Task:
    """The task as run with a production fault that changes the calls (``loop``: the first call three
    times; ``invalid_call``: a string argument of the first call passed as a number). ``tool_error`` and
    ``cut_off`` change how the run is recorded, not the calls (standins.formats.record_fault)."""
    if not task.steps or kind not in ("loop", "invalid_call"):
        return replace(task, extra={**task.extra, "fault": kind})
    steps = [replace(s, args=dict(s.args)) for s in task.steps]
    if kind == "loop":
        steps = [steps[0], replace(steps[0]), replace(steps[0]), *steps[1:]]
    else:
        strings = sorted(k for k, v in steps[0].args.items() if isinstance(v, str))
        if strings:
            steps[0].args[strings[0]] = 12345
    return replace(task, steps=steps, extra={**task.extra, "fault": kind})
