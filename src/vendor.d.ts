// Types of the untyped packages the service uses.
declare module 'postgres-date' {
  /** PostgreSQL's text form of a date or timestamp to a Date (years before 100 and BC included). */
  export default function parseDate(text: string): Date | number | null;
}
