/**
 * People and invitations (admins and owners): who may sign in, with which role; invite by email (the
 * link is shown to pass on: the platform sends no mail); change a role; remove a person (their
 * sessions end within a minute). A role is offered only up to the inviter's own.
 */
import type { JSX } from 'preact';
import { useState } from 'preact/hooks';
import { api, asApiError, listOf, seg, useApi, type ApiError } from '../api';
import { ROLES, can, type Me, type Role } from '../roles';
import { cellText, ConfirmButton, CopyField, Empty, ErrorText, Loading, Section, Select, TextField, Time } from '../ui';

interface Person {
  id: string;
  email: string;
  role: Role;
  created_at?: string;
  last_sign_in_at?: string | null;
}
interface Invitation {
  id?: string;
  email: string;
  role: Role;
  expires_at?: string;
  used_at?: string | null;
  status?: string;
  created_at?: string;
}

export function PeoplePage({ me }: { me: Me }): JSX.Element {
  const people = useApi<unknown>('/people');
  const invitations = useApi<unknown>('/invitations');
  const list = listOf<Person>(people.data, 'people');
  const invs = listOf<Invitation>(invitations.data, 'invitations');
  const grantable = ROLES.filter((r) => can(me.person.role, r));
  return (
    <>
      <Section title="People">
        {people.loading && !people.data ? <Loading what="people" /> : null}
        <ErrorText error={people.error} />
        {list.length ? (
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Email</th>
                  <th scope="col">Role</th>
                  <th scope="col">Joined</th>
                  <th scope="col">Actions</th>
                </tr>
              </thead>
              <tbody>
                {list.map((p) => (
                  <PersonRow key={p.id} person={p} me={me} grantable={grantable} onChanged={people.reload} />
                ))}
              </tbody>
            </table>
          </div>
        ) : null}
      </Section>
      <Invite grantable={grantable} onInvited={invitations.reload} />
      <Section title="Invitations">
        {invitations.loading && !invitations.data ? <Loading what="invitations" /> : null}
        <ErrorText error={invitations.error} />
        {invitations.data && invs.length === 0 ? <Empty>No invitations.</Empty> : null}
        {invs.length ? (
          <div class="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Email</th>
                  <th scope="col">Role</th>
                  <th scope="col">Status</th>
                  <th scope="col">Expires</th>
                </tr>
              </thead>
              <tbody>
                {invs.map((i, n) => (
                  <tr key={i.id ?? n}>
                    <td>{i.email}</td>
                    <td>{i.role}</td>
                    <td>{i.status ?? (i.used_at ? 'used' : 'pending')}</td>
                    <td>
                      <Time value={i.expires_at} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ) : null}
      </Section>
    </>
  );
}

function PersonRow({ person, me, grantable, onChanged }: { person: Person; me: Me; grantable: readonly Role[]; onChanged: () => void }): JSX.Element {
  const [role, setRole] = useState<string>(person.role);
  const [error, setError] = useState<ApiError | undefined>();
  const self = person.id === me.person.id;
  // An admin does not change an owner (nor anyone above their own role).
  const mayChange = !self && can(me.person.role, person.role);
  const save = async () => {
    setError(undefined);
    try {
      await api('PATCH', `/people/${seg(person.id)}`, { role });
      onChanged();
    } catch (err) {
      setError(asApiError(err));
    }
  };
  const remove = async () => {
    setError(undefined);
    try {
      await api('DELETE', `/people/${seg(person.id)}`);
      onChanged();
    } catch (err) {
      setError(asApiError(err));
    }
  };
  return (
    <tr>
      <td>
        {person.email}
        {self ? <span class="muted"> (you)</span> : null}
      </td>
      <td>
        {mayChange ? (
          <span class="inline">
            <Select hideLabel label={`Role of ${person.email}`} value={role} onValue={setRole} options={grantable.map((r) => [r, r] as const)} />
            <button type="button" onClick={save} disabled={role === person.role}>
              Save role
            </button>
          </span>
        ) : (
          person.role
        )}
      </td>
      <td>
        <Time value={person.created_at} />
      </td>
      <td>
        {mayChange ? <ConfirmButton label="Remove" confirmLabel={`Confirm removing ${person.email}`} onConfirm={remove} /> : cellText(null)}
        <ErrorText error={error} />
      </td>
    </tr>
  );
}

function Invite({ grantable, onInvited }: { grantable: readonly Role[]; onInvited: () => void }): JSX.Element {
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<string>('viewer');
  const [days, setDays] = useState('7');
  const [error, setError] = useState<ApiError | undefined>();
  const [link, setLink] = useState<{ url: string; expires: string } | undefined>();
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    setLink(undefined);
    try {
      const a = await api<{ invitation_url: string; expires_at: string }>('POST', '/invitations', { email: email.trim(), role, expires_in_hours: Number(days) * 24 });
      setLink({ url: a.invitation_url, expires: a.expires_at });
      setEmail('');
      onInvited();
    } catch (err) {
      setError(asApiError(err));
    }
  };
  return (
    <Section title="Invite a person">
      <form class="inline-form" onSubmit={submit} aria-label="Invite a person">
        <TextField label="Email" type="email" value={email} onValue={setEmail} error={error?.param === 'email' ? error : undefined} />
        <Select label="Role" value={role} onValue={setRole} options={grantable.map((r) => [r, r] as const)} />
        <Select
          label="Expires in"
          value={days}
          onValue={setDays}
          options={[
            ['1', '1 day'],
            ['7', '7 days'],
            ['14', '14 days'],
          ]}
        />
        <button type="submit" class="primary">
          Create invitation
        </button>
      </form>
      {error && error.param !== 'email' ? <ErrorText error={error} /> : null}
      {link ? (
        <div class="notice">
          <CopyField label="Invitation link" value={link.url} hint="Send it to the person yourself; it works once." />
          <p>
            Expires <Time value={link.expires} />.
          </p>
        </div>
      ) : null}
    </Section>
  );
}
