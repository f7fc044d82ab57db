/** A small Markdown guide whose headings make cited locators (`heading=Island guide > Ferry > Winter`): the clients' tests add it to collections and search it. */
export const GUIDE = `# Island guide

The island sits in the northern sea.

## Ferry

### Winter

The winter ferry leaves the harbour at 08:00 and 16:00.

### Summer

The summer ferry leaves every hour from 07:00.

## Geology

Volcanic rock forms the cliffs of the island.
`;
